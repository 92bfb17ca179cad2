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

package providerconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
)

// Every kind a controller records Events on is in the recorders' Scheme: client-go's recorder drops an Event on an
// object whose kind its scheme does not know ("Could not construct reference"), so a user would never see it.
func TestTheEventSchemeKnowsEveryKindControllersReportOn(t *testing.T) {
	for _, obj := range []runtime.Object{
		&corev1.Service{}, &corev1.Namespace{}, &corev1.Pod{}, &networkingv1.Ingress{},
		&mpv1alpha1.ProviderConfig{}, &mpv1alpha1.Translation{}, &tunnelv1alpha1.PangolinResource{},
		&gatewayv1.HTTPRoute{}, &gatewayv1.Gateway{}, &gatewayv1.GatewayClass{},
	} {
		if _, _, err := Scheme.ObjectKinds(obj); err != nil {
			t.Errorf("%T: %v", obj, err)
		}
	}
}
