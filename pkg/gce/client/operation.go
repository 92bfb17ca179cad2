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
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
)

// mutate makes one mutating call and waits for the zonal operation it returns: a token of the tenant's bucket, the
// call (given the context that carries the tenant's transport, and a request ID of its own so GCE can tell a repeated
// request from a new one), its metrics, then the wait. Every insert, delete, attach and detach goes through here, so
// none can skip the bucket, the metrics or the wait.
func (c *Client) mutate(ctx context.Context, method, zone string, call func(ctx context.Context, requestID string) (*compute.Operation, error)) error {
	if err := c.take(ctx, true); err != nil {
		return err
	}
	start := time.Now()
	op, err := call(c.withTransport(ctx), uuid.NewString())
	c.observeOperation(method, start, op, err)
	if err != nil {
		return err
	}
	return c.wait(ctx, zone, op)
}

// observeOperation records a call that returns an operation. An operation that comes back DONE with an error is a
// failure of the call as the caller sees it (operationError), though its HTTP status was 200: counting it as a
// success would hide every asynchronous failure from the error ratio.
func (c *Client) observeOperation(method string, start time.Time, op *compute.Operation, err error) {
	if err == nil && op != nil && op.Status == "DONE" {
		err = operationError(op)
	}
	c.observe(method, start, err)
}

// OperationWaitError says that a call was accepted but waiting for its operation failed (a rate limit, a timeout):
// the change may still happen. Callers keep Operation and call WaitOperation before acting on the resource again.
type OperationWaitError struct {
	Zone, Operation string
	Err             error
}

func (e *OperationWaitError) Error() string {
	return fmt.Sprintf("waiting for operation %s: %v", e.Operation, e.Err)
}

func (e *OperationWaitError) Unwrap() error { return e.Err }

// WaitOperation waits for an operation a call returned earlier, by name, until it is DONE, and returns its error.
func (c *Client) WaitOperation(ctx context.Context, zone, name string) error {
	return c.wait(ctx, zone, &compute.Operation{Name: name, Status: "RUNNING"})
}

// wait polls the zonal operation with zoneOperations.wait until it is DONE. The wait method is best-effort (it may
// return a RUNNING operation early), hence the loop; each round is one call from the tenant's bucket. A DONE
// operation that failed becomes a *googleapi.Error with the operation's HTTP status, so callers classify it like a
// synchronous error.
func (c *Client) wait(ctx context.Context, zone string, op *compute.Operation) error {
	ctx, cancel := context.WithTimeout(ctx, c.operationTimeout)
	defer cancel()
	for op.Status != "DONE" {
		if err := c.take(ctx, false); err != nil {
			return &OperationWaitError{Zone: zone, Operation: op.Name, Err: err}
		}
		start := time.Now()
		next, err := c.svc.ZoneOperations.Wait(c.project, zone, op.Name).Context(c.withTransport(ctx)).Do()
		c.observeOperation(MethodOperationWait, start, next, err)
		if err != nil {
			return &OperationWaitError{Zone: zone, Operation: op.Name, Err: err}
		}
		op = next
	}
	return operationError(op)
}

func operationError(op *compute.Operation) error {
	if op.Error == nil || len(op.Error.Errors) == 0 {
		return nil
	}
	first := op.Error.Errors[0]
	code := int(op.HttpErrorStatusCode)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	return &googleapi.Error{
		Code:    code,
		Message: fmt.Sprintf("operation %s failed: %s - %s", op.Name, first.Code, first.Message),
		Errors:  []googleapi.ErrorItem{{Reason: operationReason(first.Code, code), Message: first.Message}},
	}
}

// operationReason maps an operation error code to the reason the same failure has as a synchronous error, so that
// IsNotFound and the others see through operations.
func operationReason(code string, status int) string {
	switch code {
	case "RESOURCE_NOT_FOUND":
		return ReasonNotFound
	case "RESOURCE_ALREADY_EXISTS":
		return ReasonAlreadyExists
	case "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE":
		return ReasonInUse
	}
	if status == http.StatusTooManyRequests {
		return ReasonRateLimitExceeded
	}
	return strings.ToLower(code)
}
