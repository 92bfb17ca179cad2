/*
Copyright The multiproject-controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package sharding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// status.shard is the record of which shard holds a tenant, and the one that a label removed by hand, or an update
// that replaces the object, cannot erase: a write to the object does not change its status subresource. A shard
// records itself there before it starts a tenant (RecordOwner) and clears it only once it has stopped the tenant
// for good (Release); until then the sharder does not assign the tenant again (Decide: WaitForRelease) and an
// unsharded replica does not start it (Holders).

// ErrStillOwned is Release's error when the labels as stored give the tenant to the shard again.
var ErrStillOwned = errors.New("the ProviderConfig is labeled with this shard again")

// RecordOwner writes shard into the status of pc before the shard starts it, on the condition that the object is
// still the one read (its resourceVersion): a label removed or changed since makes the write fail with a conflict,
// and the shard must not start the tenant on that read. It returns the updated object, or nil when it is gone.
func RecordOwner(ctx context.Context, client mpclientset.Interface, pc *mpv1alpha1.ProviderConfig, shard string) (*mpv1alpha1.ProviderConfig, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pc.ResourceVersion},
		"status":   map[string]any{"shard": shard},
	})
	if err != nil {
		return nil, err
	}
	updated, err := client.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, pc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recording shard %s in the status of ProviderConfig %s: %w", shard, pc.Name, err)
	}
	return updated, nil
}

// Release clears status.shard of the ProviderConfig name if it names shard, which must have stopped the tenant and
// no longer own it: from then on the sharder may assign it elsewhere, and an unsharded replica may start it. It
// reads the object as stored and writes on the condition that it is unchanged, retrying on conflicts; it fails with
// ErrStillOwned when the labels give the tenant to shard again, and does nothing when the status names another
// shard or the object is gone.
func Release(ctx context.Context, client mpclientset.Interface, name, shard string) error {
	pcs := client.MultiprojectV1alpha1().ProviderConfigs()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case pc.Status.Shard != shard:
			return nil
		case Owns(shard, pc.Labels):
			return ErrStillOwned
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": pc.ResourceVersion},
			"status":   map[string]any{"shard": nil},
		})
		if err != nil {
			return err
		}
		_, err = pcs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
