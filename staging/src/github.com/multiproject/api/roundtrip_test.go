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

// Package api_test checks, for every kind of every group in this module, that
// the types survive the trips a controller puts them through (deep copy,
// JSON, CBOR, unstructured), and pins the JSON field names that other
// programs (the CRD schemas, Rancher, the pangolin-operator) rely on.
package api_test

import (
	"encoding/json"
	"math/rand"
	"testing"

	apitestingfuzzer "k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"

	multiprojectv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	managementv3 "github.com/multiproject/api/rancher/management/v3"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		multiprojectv1alpha1.AddToScheme,
		managementv3.AddToScheme,
		tunnelv1alpha1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatalf("adding to scheme: %v", err)
		}
	}
	return scheme
}

// TestSchemeRegistersEveryKind guards against a kind that has a client (and
// a CRD) but was forgotten in addKnownTypes: its informer could not decode
// anything.
func TestSchemeRegistersEveryKind(t *testing.T) {
	scheme := newScheme(t)
	want := []schema.GroupVersionKind{
		multiprojectv1alpha1.SchemeGroupVersion.WithKind("ProviderConfig"),
		multiprojectv1alpha1.SchemeGroupVersion.WithKind("ProviderConfigList"),
		multiprojectv1alpha1.SchemeGroupVersion.WithKind("Translation"),
		multiprojectv1alpha1.SchemeGroupVersion.WithKind("TranslationList"),
		managementv3.SchemeGroupVersion.WithKind("Project"),
		managementv3.SchemeGroupVersion.WithKind("ProjectList"),
		tunnelv1alpha1.SchemeGroupVersion.WithKind("PangolinTunnel"),
		tunnelv1alpha1.SchemeGroupVersion.WithKind("PangolinTunnelList"),
		tunnelv1alpha1.SchemeGroupVersion.WithKind("PangolinResource"),
		tunnelv1alpha1.SchemeGroupVersion.WithKind("PangolinResourceList"),
	}
	for _, gvk := range want {
		if !scheme.Recognizes(gvk) {
			t.Errorf("scheme does not recognize %v", gvk)
		}
	}
	for got, want := range map[string]string{
		multiprojectv1alpha1.SchemeGroupVersion.String(): "multiproject.io/v1alpha1",
		managementv3.SchemeGroupVersion.String():         "management.cattle.io/v3",
		tunnelv1alpha1.SchemeGroupVersion.String():       "tunnel.pangolin.io/v1alpha1",
	} {
		if got != want {
			t.Errorf("group version %q, want %q", got, want)
		}
	}
}

// TestRoundTripJSON fills every kind with random values and checks that deep
// copy and a JSON encode/decode give back an equal object.
func TestRoundTripJSON(t *testing.T) {
	scheme := newScheme(t)
	codecs := serializer.NewCodecFactory(scheme)
	seed := rand.Int63()
	t.Logf("fuzz seed %d", seed)
	filler := apitestingfuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs)
	roundtrip.RoundTripExternalTypesWithoutProtobuf(t, scheme, codecs, filler, nil)
}

// TestRoundTripUnstructured checks native -> JSON/CBOR -> unstructured ->
// native, the path that dynamic clients and server-side apply take.
func TestRoundTripUnstructured(t *testing.T) {
	scheme := newScheme(t)
	// None of these groups has an internal version, so every kind is fuzzed
	// directly.
	noInternal := sets.New[schema.GroupVersionKind]()
	for gvk := range scheme.AllKnownTypes() {
		noInternal.Insert(gvk)
	}
	roundtrip.RoundtripToUnstructured(t, scheme, metafuzzer.Funcs, nil, noInternal)
}

// TestJSONFieldNames pins the wire names. They are the API: renaming a Go
// field must never rename what is stored in etcd or sent to the
// pangolin-operator.
func TestJSONFieldNames(t *testing.T) {
	enabled := true
	siteID := int64(7)
	for _, tc := range []struct {
		name string
		obj  any
		want string
	}{{
		name: "ProviderConfig",
		obj: &multiprojectv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"},
			Spec: multiprojectv1alpha1.ProviderConfigSpec{
				GCP: &multiprojectv1alpha1.GCPConfig{
					ProjectID:     "tenant-a-prod",
					ProjectNumber: 123456789012,
					Network:       "vpc-a",
					Subnetwork:    "subnet-a",
					CredentialsSecretRef: &multiprojectv1alpha1.SecretKeyReference{
						Namespace: "kube-system", Name: "tenant-a-gcp", Key: "key.json",
					},
				},
				Rancher: &multiprojectv1alpha1.RancherConfig{ClusterID: "c-abc12"},
				Pangolin: &multiprojectv1alpha1.PangolinConfig{
					TunnelNamespace:      "pangolin",
					DefaultTunnel:        "default",
					TunnelsByClassSuffix: map[string]multiprojectv1alpha1.TunnelName{"internal": "tunnel-b"},
					SSODefault:           true,
					BlockAccessDefault:   true,
				},
			},
			Status: multiprojectv1alpha1.ProviderConfigStatus{ObservedGeneration: 2},
		},
		want: `{"metadata":{"name":"tenant-a"},"spec":{` +
			`"gcp":{"projectID":"tenant-a-prod","projectNumber":123456789012,"network":"vpc-a","subnetwork":"subnet-a",` +
			`"credentialsSecretRef":{"namespace":"kube-system","name":"tenant-a-gcp","key":"key.json"}},` +
			`"rancher":{"clusterID":"c-abc12"},` +
			`"pangolin":{"tunnelNamespace":"pangolin","defaultTunnel":"default","tunnelsByClassSuffix":{"internal":"tunnel-b"},` +
			`"ssoDefault":true,"blockAccessDefault":true}},` +
			`"status":{"observedGeneration":2}}`,
	}, {
		name: "Translation",
		obj: &multiprojectv1alpha1.Translation{
			ObjectMeta: metav1.ObjectMeta{Name: "svc-web-80", Namespace: "shop"},
			Spec: multiprojectv1alpha1.TranslationSpec{Resources: []multiprojectv1alpha1.BackendResource{{
				Kind:        multiprojectv1alpha1.BackendResourceKindNetworkEndpointGroup,
				Name:        "k8s1-shop-web-80",
				Zone:        "europe-west1-b",
				Description: "managed-by=multiproject",
				NetworkEndpointGroup: &multiprojectv1alpha1.NetworkEndpointGroupParameters{
					NetworkEndpointType: multiprojectv1alpha1.NetworkEndpointTypeGCEVMIPPort,
					Network:             "vpc-a",
					Subnetwork:          "subnet-a",
					Port:                8080,
					Endpoints: []multiprojectv1alpha1.NetworkEndpoint{
						{Instance: "node-1", IPAddress: "10.0.0.5", Port: 8080},
					},
				},
			}}},
			Status: multiprojectv1alpha1.TranslationStatus{
				ObservedGeneration: 1,
				Resources: []multiprojectv1alpha1.BackendResourceStatus{{
					Kind:          multiprojectv1alpha1.BackendResourceKindNetworkEndpointGroup,
					Name:          "k8s1-shop-web-80",
					Zone:          "europe-west1-b",
					State:         multiprojectv1alpha1.BackendResourceStateReady,
					EndpointCount: 1,
				}},
			},
		},
		want: `{"metadata":{"name":"svc-web-80","namespace":"shop"},"spec":{"resources":[{` +
			`"kind":"NetworkEndpointGroup","name":"k8s1-shop-web-80","zone":"europe-west1-b","description":"managed-by=multiproject",` +
			`"networkEndpointGroup":{"networkEndpointType":"GCE_VM_IP_PORT","network":"vpc-a","subnetwork":"subnet-a","port":8080,` +
			`"endpoints":[{"instance":"node-1","ipAddress":"10.0.0.5","port":8080}]}}]},` +
			`"status":{"observedGeneration":1,"resources":[{"kind":"NetworkEndpointGroup","name":"k8s1-shop-web-80",` +
			`"zone":"europe-west1-b","state":"Ready","endpointCount":1}]}}`,
	}, {
		name: "Project",
		obj: &managementv3.Project{
			ObjectMeta: metav1.ObjectMeta{Name: "p-xyz12", Namespace: "c-abc12"},
			Spec:       managementv3.ProjectSpec{DisplayName: "Shop", Description: "web shop", ClusterName: "c-abc12"},
			Status:     managementv3.ProjectStatus{BackingNamespace: "c-abc12-p-xyz12"},
		},
		want: `{"metadata":{"name":"p-xyz12","namespace":"c-abc12"},` +
			`"spec":{"displayName":"Shop","description":"web shop","clusterName":"c-abc12"},` +
			`"status":{"backingNamespace":"c-abc12-p-xyz12"}}`,
	}, {
		// What the ingress-tunnel controller writes. sso and blockAccess are
		// sent even when false, as the operator's own type does; an absent
		// siteRef, proxyConfig and resourceId stay absent.
		name: "PangolinResource",
		obj: &tunnelv1alpha1.PangolinResource{
			ObjectMeta: metav1.ObjectMeta{Name: "pic-shop-web-1a2b3c4d", Namespace: "shop"},
			Spec: tunnelv1alpha1.PangolinResourceSpec{
				TunnelRef:  &tunnelv1alpha1.TunnelReference{Name: "default", Namespace: "pangolin"},
				Name:       "shop/web/www.example.com",
				Protocol:   tunnelv1alpha1.ProtocolHTTP,
				HTTPConfig: &tunnelv1alpha1.HTTPConfig{Subdomain: "www", DomainName: "example.com"},
				Targets: []tunnelv1alpha1.Target{{
					IP:            "web.shop.svc.cluster.local",
					Port:          80,
					Method:        tunnelv1alpha1.TargetMethodHTTP,
					Path:          "/",
					PathMatchType: tunnelv1alpha1.PathMatchTypePrefix,
					Priority:      110,
				}},
				Enabled: &enabled,
			},
		},
		want: `{"metadata":{"name":"pic-shop-web-1a2b3c4d","namespace":"shop"},"spec":{` +
			`"tunnelRef":{"name":"default","namespace":"pangolin"},"name":"shop/web/www.example.com","protocol":"http",` +
			`"httpConfig":{"subdomain":"www","domainName":"example.com","sso":false,"blockAccess":false},` +
			`"targets":[{"ip":"web.shop.svc.cluster.local","port":80,"method":"http","path":"/","pathMatchType":"prefix","priority":110}],` +
			`"enabled":true},"status":{}}`,
	}, {
		name: "PangolinTunnel",
		obj: &tunnelv1alpha1.PangolinTunnel{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "pangolin"},
			Spec: tunnelv1alpha1.PangolinTunnelSpec{
				OrganizationRef: tunnelv1alpha1.OrganizationReference{Name: "org"},
				SiteID:          &siteID,
			},
			Status: tunnelv1alpha1.PangolinTunnelStatus{
				SiteID: 7, NiceID: "quiet-wolf", Online: true, Status: tunnelv1alpha1.TunnelStatusReady,
			},
		},
		want: `{"metadata":{"name":"default","namespace":"pangolin"},"spec":{"organizationRef":{"name":"org"},"siteId":7},` +
			`"status":{"siteId":7,"niceId":"quiet-wolf","online":true,"status":"Ready"}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("JSON changed\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

// TestDecodeOperatorTunnel decodes a PangolinTunnel as the pangolin-operator
// stores it. The operator's siteId is an integer; a mirror that declared it a
// string (as pangolin-ingress-controller's does) could not list tunnels.
func TestDecodeOperatorTunnel(t *testing.T) {
	codecs := serializer.NewCodecFactory(newScheme(t))
	stored := []byte(`{"apiVersion":"tunnel.pangolin.io/v1alpha1","kind":"PangolinTunnel",` +
		`"metadata":{"name":"edge","namespace":"pangolin"},` +
		`"spec":{"organizationRef":{"name":"org"},"siteName":"edge","siteType":"newt",` +
		`"newtClient":{"enabled":true,"replicas":1,"image":"fosrl/newt:latest"}},` +
		`"status":{"siteId":3,"niceId":"impractical-oriental-wolf-snake","online":true,"endpoint":"198.51.100.7:51820",` +
		`"newtId":"n1","bindingMode":"Created","status":"Ready","readyReplicas":1,` +
		`"conditions":[{"type":"Ready","status":"True","reason":"SiteOnline","message":"",` +
		`"lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`)
	obj, gvk, err := codecs.UniversalDeserializer().Decode(stored, nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	tunnel, ok := obj.(*tunnelv1alpha1.PangolinTunnel)
	if !ok {
		t.Fatalf("decoded %v into %T", gvk, obj)
	}
	if tunnel.Status.SiteID != 3 || tunnel.Status.Status != tunnelv1alpha1.TunnelStatusReady || !tunnel.Status.Online {
		t.Errorf("status decoded as %+v", tunnel.Status)
	}
	if tunnel.Spec.NewtClient == nil || tunnel.Spec.NewtClient.Replicas != 1 {
		t.Errorf("newtClient decoded as %+v", tunnel.Spec.NewtClient)
	}
}
