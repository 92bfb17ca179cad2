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

package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
)

// The backend service methods the client calls (metric labels).
const (
	MethodBackendServiceGet         = "backendServices.get"
	MethodBackendServicePatch       = "backendServices.patch"
	MethodRegionBackendServiceGet   = "regionBackendServices.get"
	MethodRegionBackendServicePatch = "regionBackendServices.patch"
	MethodGlobalOperationWait       = "globalOperations.wait"
	MethodRegionOperationWait       = "regionOperations.wait"
)

// ReasonConditionNotMet is GCE's reason for a write whose fingerprint is stale (HTTP 412).
const ReasonConditionNotMet = "conditionNotMet"

// IsStaleFingerprint says whether a backend service write failed because the resource changed since it was read.
func IsStaleFingerprint(err error) bool {
	var gerr *googleapi.Error
	return errors.As(err, &gerr) && gerr.Code == http.StatusPreconditionFailed
}

// GetBackendService returns the backend service (region "": global), or an error for which IsNotFound is true.
func (c *Client) GetBackendService(ctx context.Context, region, name string) (*compute.BackendService, error) {
	if err := c.take(ctx, false); err != nil {
		return nil, err
	}
	start := time.Now()
	var bs *compute.BackendService
	var err error
	if region == "" {
		bs, err = c.svc.BackendServices.Get(c.project, name).Context(c.withTransport(ctx)).Do()
		c.observe(MethodBackendServiceGet, start, err)
	} else {
		bs, err = c.svc.RegionBackendServices.Get(c.project, region, name).Context(c.withTransport(ctx)).Do()
		c.observe(MethodRegionBackendServiceGet, start, err)
	}
	return bs, err
}

// SetBackends writes the backend service's backends list, and nothing else, with the fingerprint it was read with,
// and waits for the operation. It is a patch of backends and fingerprint only, so that no field this client's
// version of compute/v1 does not know is lost, as an update (a PUT of the whole resource as decoded) would lose it.
// Every capacityScaler is sent, 0 too: the Go client leaves out a zero it is not told to send, and GCE would make
// a drained backend someone else set to 0 serve again at 1. A stale fingerprint fails with IsStaleFingerprint.
func (c *Client) SetBackends(ctx context.Context, region, name, fingerprint string, backends []*compute.Backend) error {
	for _, b := range backends {
		b.ForceSendFields = append(b.ForceSendFields, "CapacityScaler")
	}
	patch := &compute.BackendService{Fingerprint: fingerprint, Backends: backends, ForceSendFields: []string{"Backends"}}
	if err := c.take(ctx, true); err != nil {
		return err
	}
	start := time.Now()
	var op *compute.Operation
	var err error
	requestID := uuid.NewString()
	method := MethodBackendServicePatch
	if region == "" {
		op, err = c.svc.BackendServices.Patch(c.project, name, patch).RequestId(requestID).Context(c.withTransport(ctx)).Do()
	} else {
		method = MethodRegionBackendServicePatch
		op, err = c.svc.RegionBackendServices.Patch(c.project, region, name, patch).RequestId(requestID).Context(c.withTransport(ctx)).Do()
	}
	c.observeOperation(method, start, op, err)
	if err != nil {
		return err
	}
	return c.waitScoped(ctx, region, op)
}

// waitScoped waits for a global (region "") or regional operation, as wait does for a zonal one.
func (c *Client) waitScoped(ctx context.Context, region string, op *compute.Operation) error {
	ctx, cancel := context.WithTimeout(ctx, c.operationTimeout)
	defer cancel()
	for op.Status != "DONE" {
		if err := c.take(ctx, false); err != nil {
			return &OperationWaitError{Zone: region, Operation: op.Name, Err: err}
		}
		start := time.Now()
		var next *compute.Operation
		var err error
		if region == "" {
			next, err = c.svc.GlobalOperations.Wait(c.project, op.Name).Context(c.withTransport(ctx)).Do()
			c.observeOperation(MethodGlobalOperationWait, start, next, err)
		} else {
			next, err = c.svc.RegionOperations.Wait(c.project, region, op.Name).Context(c.withTransport(ctx)).Do()
			c.observeOperation(MethodRegionOperationWait, start, next, err)
		}
		if err != nil {
			return &OperationWaitError{Zone: region, Operation: op.Name, Err: err}
		}
		op = next
	}
	return operationError(op)
}
