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
	"net"
	"net/http"
	"strings"

	"google.golang.org/api/googleapi"
)

// Reasons GCE puts in errors[0].reason.
const (
	ReasonNotFound          = "notFound"
	ReasonAlreadyExists     = "alreadyExists"
	ReasonInUse             = "resourceInUseByAnotherResource"
	ReasonRateLimitExceeded = "rateLimitExceeded"
	ReasonUserRateLimit     = "userRateLimitExceeded"
	ReasonQuotaExceeded     = "quotaExceeded"
)

// The compute/v1 methods the client calls, the method label of its call metrics.
const (
	MethodGet            = "networkEndpointGroups.get"
	MethodInsert         = "networkEndpointGroups.insert"
	MethodDelete         = "networkEndpointGroups.delete"
	MethodAttach         = "networkEndpointGroups.attachNetworkEndpoints"
	MethodDetach         = "networkEndpointGroups.detachNetworkEndpoints"
	MethodListEndpoints  = "networkEndpointGroups.listNetworkEndpoints"
	MethodAggregatedList = "networkEndpointGroups.aggregatedList"
	MethodOperationWait  = "zoneOperations.wait"
)

// The results of a call, the result label of its call metrics: a fixed set, so that an error's text never becomes
// a label value.
const (
	ResultSuccess        = "success"
	ResultNotFound       = "not_found"
	ResultConflict       = "conflict"
	ResultRateLimited    = "rate_limited"
	ResultQuotaExceeded  = "quota_exceeded"
	ResultForbidden      = "forbidden"
	ResultClientError    = "client_error"
	ResultServerError    = "server_error"
	ResultCanceled       = "canceled"
	ResultTimeout        = "timeout"
	ResultTransportError = "transport_error"
)

// Class is what the caller should do about an error.
type Class string

const (
	// ClassNone: no error.
	ClassNone Class = ""
	// ClassNotFound: the resource does not exist (a delete of it is done; a change to it needs it recreated).
	ClassNotFound Class = "NotFound"
	// ClassAlreadyExists: the name is taken.
	ClassAlreadyExists Class = "AlreadyExists"
	// ClassRetryable: rate limits (403 rateLimitExceeded, 429) and server errors (5xx); back off and retry.
	ClassRetryable Class = "Retryable"
	// ClassInUse: a delete of a NEG that a backend service still uses; retrying helps only once the user removes it.
	ClassInUse Class = "InUse"
	// ClassInvalid: the request was refused as wrong (400 and other 4xx); retrying the same request cannot help.
	ClassInvalid Class = "Invalid"
	// ClassOther: not an API error (a cancelled context, a transport error); retry.
	ClassOther Class = "Other"
)

// Classify sorts err by the *googleapi.Error code and reason it wraps.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) {
		return ClassOther
	}
	reason := Reason(err)
	switch {
	case gerr.Code == http.StatusNotFound:
		return ClassNotFound
	case gerr.Code == http.StatusConflict || reason == ReasonAlreadyExists:
		return ClassAlreadyExists
	case gerr.Code == http.StatusTooManyRequests,
		gerr.Code == http.StatusForbidden && (reason == ReasonRateLimitExceeded || reason == ReasonUserRateLimit),
		gerr.Code >= 500:
		return ClassRetryable
	case reason == ReasonInUse || strings.Contains(gerr.Message, "is already being used by"):
		return ClassInUse
	default:
		return ClassInvalid
	}
}

// Result names the outcome of one call for its metrics: success, the HTTP status class or GCE reason of an API
// error, or why no answer came (canceled, timeout, transport_error).
func Result(err error) string {
	if err == nil {
		return ResultSuccess
	}
	// Before the API error: a cancelled call is the caller's doing, whatever the transport made of it.
	if errors.Is(err, context.Canceled) {
		return ResultCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ResultTimeout
	}
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) {
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			return ResultTimeout
		}
		return ResultTransportError
	}
	reason := Reason(err)
	switch {
	case gerr.Code == http.StatusNotFound:
		return ResultNotFound
	case gerr.Code == http.StatusConflict || reason == ReasonAlreadyExists:
		return ResultConflict
	case gerr.Code == http.StatusTooManyRequests || reason == ReasonRateLimitExceeded || reason == ReasonUserRateLimit:
		return ResultRateLimited
	case reason == ReasonQuotaExceeded:
		return ResultQuotaExceeded
	case gerr.Code == http.StatusUnauthorized || gerr.Code == http.StatusForbidden:
		return ResultForbidden
	case gerr.Code >= 500:
		return ResultServerError
	default:
		return ResultClientError
	}
}

// Reason returns errors[0].reason of the *googleapi.Error err wraps, or "".
func Reason(err error) string {
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || len(gerr.Errors) == 0 {
		return ""
	}
	return gerr.Errors[0].Reason
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return Classify(err) == ClassNotFound }

// IsRetryable reports a rate limit or server error.
func IsRetryable(err error) bool { return Classify(err) == ClassRetryable }
