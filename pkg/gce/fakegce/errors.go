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

package fakegce

import (
	"fmt"
	"net/http"
	"strings"
)

// Reasons the fake puts in errors[].reason. They are the strings GCE uses, so callers that classify errors by
// googleapi.Error.Errors[0].Reason (as ingress-gce's helpers do) behave as against the real API.
const (
	ReasonInvalid           = "invalid"
	ReasonRequired          = "required"
	ReasonNotFound          = "notFound"
	ReasonAlreadyExists     = "alreadyExists"
	ReasonResourceInUse     = "resourceInUseByAnotherResource"
	ReasonRateLimitExceeded = "rateLimitExceeded"
	ReasonQuotaExceeded     = "quotaExceeded"
	ReasonBackendError      = "backendError"
	ReasonForbidden         = "forbidden"
	ReasonParseError        = "parseError"
	// ReasonNotImplemented marks a request the fake does not implement. It is not a GCE reason: it is the fake
	// saying so, with HTTP 501, so that a gap in the fake can never be mistaken for an API answer such as notFound.
	ReasonNotImplemented = "notImplemented"
)

// apiError is one failed call: the HTTP status, GCE's reason, and the message, as GCE sends them.
type apiError struct {
	code    int
	reason  string
	message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.code, e.reason, e.message) }

// errorBody is the JSON GCE sends with a non-2xx status. googleapi.CheckResponse decodes it into a *googleapi.Error:
// "code" becomes Code, "message" Message, and each errors[] item an ErrorItem with Reason and Message.
type errorBody struct {
	Error errorBodyError `json:"error"`
}

type errorBodyError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Errors  []errorBodyItem `json:"errors"`
}

type errorBodyItem struct {
	Message string `json:"message"`
	Domain  string `json:"domain"`
	Reason  string `json:"reason"`
}

func (e *apiError) body() errorBody {
	return errorBody{Error: errorBodyError{
		Code:    e.code,
		Message: e.message,
		Errors:  []errorBodyItem{{Message: e.message, Domain: "global", Reason: e.reason}},
	}}
}

// operationErrorCode is the upper-case code GCE puts in Operation.error.errors[].code for a failure that surfaces
// in an operation rather than in the HTTP response.
func (e *apiError) operationErrorCode() string {
	switch e.reason {
	case ReasonNotFound:
		return "RESOURCE_NOT_FOUND"
	case ReasonAlreadyExists:
		return "RESOURCE_ALREADY_EXISTS"
	case ReasonResourceInUse:
		return "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
	case ReasonInvalid:
		return "INVALID_FIELD_VALUE"
	case ReasonRequired:
		return "REQUIRED_FIELD_NOT_SPECIFIED"
	case ReasonRateLimitExceeded:
		return "RATE_LIMIT_EXCEEDED"
	case ReasonQuotaExceeded:
		return "QUOTA_EXCEEDED"
	}
	// Fall back to the reason in GCE's SCREAMING_SNAKE_CASE so a custom fault reason is still recognisable.
	var b strings.Builder
	for i, r := range e.reason {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// httpErrorMessage is Operation.httpErrorMessage: the status text in upper case, as GCE writes it ("BAD REQUEST").
func (e *apiError) httpErrorMessage() string {
	return strings.ToUpper(http.StatusText(e.code))
}

// defaultReason is the reason given to an injected fault that names only an HTTP status.
func defaultReason(code int) string {
	switch code {
	case http.StatusBadRequest:
		return ReasonInvalid
	case http.StatusForbidden:
		return ReasonForbidden
	case http.StatusNotFound:
		return ReasonNotFound
	case http.StatusConflict:
		return ReasonAlreadyExists
	case http.StatusTooManyRequests:
		return ReasonRateLimitExceeded
	case http.StatusNotImplemented:
		return ReasonNotImplemented
	}
	return ReasonBackendError
}

func errNotFound(resourcePath string) *apiError {
	return &apiError{http.StatusNotFound, ReasonNotFound, fmt.Sprintf("The resource '%s' was not found", resourcePath)}
}

func errAlreadyExists(resourcePath string) *apiError {
	return &apiError{http.StatusConflict, ReasonAlreadyExists, fmt.Sprintf("The resource '%s' already exists", resourcePath)}
}

// errInvalidField follows GCE's wording for a field that fails validation: "Invalid value for field 'X': 'v'. why".
func errInvalidField(field, value, why string) *apiError {
	return &apiError{http.StatusBadRequest, ReasonInvalid, fmt.Sprintf("Invalid value for field '%s': '%s'. %s", field, value, why)}
}

func errRequired(field string) *apiError {
	return &apiError{http.StatusBadRequest, ReasonRequired, fmt.Sprintf("Required field '%s' not specified", field)}
}

// errInUse carries the words "is already being used by", which ingress-gce's IsInUsedByError matches on.
func errInUse(resourcePath string, users []string) *apiError {
	return &apiError{http.StatusBadRequest, ReasonResourceInUse,
		fmt.Sprintf("The network_endpoint_group resource '%s' is already being used by '%s'", resourcePath, strings.Join(users, "', '"))}
}

func errNotImplemented(format string, args ...any) *apiError {
	return &apiError{http.StatusNotImplemented, ReasonNotImplemented, "fakegce: " + fmt.Sprintf(format, args...)}
}
