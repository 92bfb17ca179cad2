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

// Package translationwrite owns the Translation writes whose answer the writer needs only the metadata of: the
// translator's spec patch and the pusher's status update. They ask the API server to answer with the object's
// PartialObjectMetadata (Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1), as client-go's
// metadata client does for reads: the server then encodes, and the manager decodes, the metadata instead of the
// whole Translation with every endpoint. A Translation's spec and status are what the writer sent; the answer adds
// what the server sets (resourceVersion, generation, managed fields).
package translationwrite

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// acceptMetadata asks for the written object's metadata only; plain JSON stays acceptable for errors (a Status).
const acceptMetadata = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

const resource = "translations"

// restClient is the clientset's REST client for Translations, or nil for a fake clientset (which has none): the
// writes then go through the typed client, whose answer holds the metadata too.
func restClient(client mpclientset.Interface) *rest.RESTClient {
	rc, _ := client.MultiprojectV1alpha1().RESTClient().(*rest.RESTClient)
	return rc
}

// Patch patches the Translation (subresources as the typed client takes them) and returns its metadata after the
// patch.
func Patch(ctx context.Context, client mpclientset.Interface, namespace, name string, pt types.PatchType, data []byte,
	opts metav1.PatchOptions, subresources ...string) (*metav1.ObjectMeta, error) {
	rc := restClient(client)
	if rc == nil {
		out, err := client.MultiprojectV1alpha1().Translations(namespace).Patch(ctx, name, pt, data, opts, subresources...)
		if err != nil {
			return nil, err
		}
		return &out.ObjectMeta, nil
	}
	return decode(rc.Patch(pt).Namespace(namespace).Resource(resource).Name(name).SubResource(subresources...).
		VersionedParams(&opts, metav1.ParameterCodec).Body(data).SetHeader("Accept", acceptMetadata).Do(ctx))
}

// UpdateStatus writes tr's status through the status subresource, bound to tr's resourceVersion, and returns the
// Translation as written: tr's spec and status with the metadata the API server answered. tr is the caller's to
// give away: the answer shares its spec.
func UpdateStatus(ctx context.Context, client mpclientset.Interface, tr *mpv1alpha1.Translation, opts metav1.UpdateOptions) (*mpv1alpha1.Translation, error) {
	rc := restClient(client)
	if rc == nil {
		return client.MultiprojectV1alpha1().Translations(tr.Namespace).UpdateStatus(ctx, tr, opts)
	}
	// The body is encoded as the typed client encodes it (with apiVersion and kind).
	meta, err := decode(rc.Put().Namespace(tr.Namespace).Resource(resource).Name(tr.Name).SubResource("status").
		VersionedParams(&opts, metav1.ParameterCodec).Body(tr).SetHeader("Accept", acceptMetadata).Do(ctx))
	if err != nil {
		return nil, err
	}
	// The status as the API server stores it: times at the second, as JSON carries them.
	status, err := json.Marshal(tr.Status)
	if err != nil {
		return nil, err
	}
	written := &mpv1alpha1.Translation{TypeMeta: tr.TypeMeta, ObjectMeta: *meta, Spec: tr.Spec}
	if err := json.Unmarshal(status, &written.Status); err != nil {
		return nil, err
	}
	return written, nil
}

// decode reads the metadata answer of a write.
func decode(result rest.Result) (*metav1.ObjectMeta, error) {
	raw, err := result.Raw()
	if err != nil {
		return nil, err
	}
	var meta metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("decoding the write's answer: %w", err)
	}
	// A server that ignored the Accept parameters answers with the whole Translation, whose metadata is the same.
	if meta.Kind != "PartialObjectMetadata" && meta.Kind != "Translation" {
		return nil, fmt.Errorf("the write was answered with a %q, not the Translation's metadata", meta.Kind)
	}
	return &meta.ObjectMeta, nil
}
