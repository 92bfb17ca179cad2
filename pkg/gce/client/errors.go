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
	"errors"
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
