//go:build integration

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

package e2e

import (
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
)

// TestCustomNEGNamesArePerProject: a custom NEG name is held once per GCP project. Two tenants in two projects both
// get a NEG named web, each with its own endpoints in its own project; a third tenant, sharing the first one's
// project, asks for web and gets NEGNameConflict naming the first one's Service and the project, and no Translation,
// while the first one's NEGs keep their GCE ids and endpoints. The second tenant then moves to a new project: web
// is claimed anew there, its NEGs are made in the new project and deleted from the old one. A watch of every
// Translation, running through the whole test, fails it if two ever declared web in one project at once.
func TestCustomNEGNamesArePerProject(t *testing.T) {
	const negName = "web"
	resetLease(t)
	gce := startFakeGCE(t)
	first, second := newWorkload(t, gce), newWorkload(t, gce)
	third := newWorkloadWithoutProviderConfig(t, gce)
	third.project = first.project
	third.createProviderConfig()
	counter := countDeclarers(t, first, negName)
	m := startManager(t, "negprojects", managerKubeconfig(t), gce.Endpoint(), lifecycleElection)
	waitLeader(t, m.identity(), 2*time.Minute)

	// The first tenant's Service is created and served before the others ask: it holds web in its project by every
	// rule (the earlier claim, the one that publishes it).
	first.setNamedService("api", negName, first.endpoints(0, 0, 2))
	first.waitConverged("the first tenant's NEG " + negName)
	second.setNamedService("api", negName, second.endpoints(0, 0, 1))
	second.waitConverged("the second tenant's NEG " + negName + ", in its own project")
	firstIDs := first.negIDs("api")

	third.createNamedService("api", negName)
	third.writeSlice(endpointSlice(third.appNS, "api", third.endpoints(0, 0, 1)))
	waitEvent(third.ctx, t, "Service", third.appNS, "api", translator.ReasonNameConflict,
		fmt.Sprintf("NEG name %q", negName), "GCP project "+first.project, "Service "+first.appNS+"/api")
	if n := third.translationCount(); n != 0 {
		t.Errorf("the third tenant's Service has %d Translations, want none", n)
	}
	// Exactly the first tenant's NEGs in the shared project, the same ones, with its endpoints.
	first.waitConverged("the first tenant's NEG after the conflict")
	if got := first.negIDs("api"); !maps.Equal(got, firstIDs) {
		t.Errorf("the holder's NEGs changed: GCE ids %v, were %v", got, firstIDs)
	}

	// The second tenant moves to a new project: web is claimed anew there.
	oldProject := second.project
	gcp := second.providerConfig().Spec.GCP.DeepCopy()
	gcp.ProjectID = second.tenant + "-p2"
	second.setGCP(gcp)
	second.project = gcp.ProjectID
	second.waitConverged("the second tenant's NEG " + negName + " in its new project")
	waitUntil(t, "nothing left in the second tenant's old project", func() (bool, string) {
		n := len(gce.NEGs(oldProject))
		return n == 0, fmt.Sprintf("%d NEGs in %s", n, oldProject)
	})
	if tr := second.translation(translationName("api")); tr.Annotations[mpv1alpha1.TranslationNEGProjectAnnotationKey] != second.project {
		t.Errorf("the moved Translation records project %q, want %s", tr.Annotations[mpv1alpha1.TranslationNEGProjectAnnotationKey], second.project)
	}
	if n := counter.stop(); n != 1 {
		t.Errorf("%d Translations declared NEG %s in one project at once, want 1", n, negName)
	}
	stopGracefully(t, m)
}

// createNamedService creates the Service name with port 80 (http), asking for the custom NEG name negName.
func (w *workload) createNamedService(name, negName string) {
	w.t.Helper()
	_, err := w.kube.CoreV1().Services(w.appNS).Create(w.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name,
			Annotations: map[string]string{w.negAnnotation: fmt.Sprintf(`{"exposed_ports":{"80":{"name":%q}}}`, negName)}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatalf("creating Service %s: %v", name, err)
	}
}
