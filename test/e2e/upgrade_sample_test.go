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
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// upgradeSampleInterval is how often the sampler reads the fake GCE and the PangolinResources.
const upgradeSampleInterval = 200 * time.Millisecond

// gceCallLog records every call the fake GCE answered, with its time and User-Agent, so that mutating calls can be
// counted per window of the scenario and a new owner's reads be seen.
type gceCallLog struct {
	mu    sync.Mutex
	calls []fakegce.CallRecord
}

func (l *gceCallLog) record(r fakegce.CallRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, r)
}

// mutations returns the mutating calls on project made from from to to.
func (l *gceCallLog) mutations(project string, from, to time.Time) []fakegce.CallRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fakegce.CallRecord
	for _, c := range l.calls {
		if c.Method.Mutating() && c.Project == project && !c.Time.Before(from) && !c.Time.After(to) {
			out = append(out, c)
		}
	}
	return out
}

// endpointsListed returns the NEGs of project, as "zone/name", whose endpoints a client whose User-Agent contains
// agent listed since since.
func (l *gceCallLog) endpointsListed(project, agent string, since time.Time) sets.Set[string] {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := sets.New[string]()
	for _, c := range l.calls {
		if c.Method == fakegce.MethodListEndpoints && c.Status == http.StatusOK && c.Project == project &&
			!c.Time.Before(since) && strings.Contains(c.UserAgent, agent) {
			out.Insert(c.Zone + "/" + c.Resource)
		}
	}
	return out
}

// negSample is one NEG as the fake GCE holds it.
type negSample struct {
	id, description string
	endpoints       int
}

// listPangolinResources lists the workloads' PangolinResources, keyed "namespace/name".
func listPangolinResources(ctx context.Context, ws []*workload) (map[string]types.UID, error) {
	out := map[string]types.UID{}
	for _, w := range ws {
		list, err := w.mp.TunnelV1alpha1().PangolinResources(w.appNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, r := range list.Items {
			out[r.Namespace+"/"+r.Name] = r.UID
		}
	}
	return out, nil
}

// readNEGs reads the projects' NEGs, keyed "project/zone/name".
func readNEGs(gce *fakegce.Server, projects []string) map[string]negSample {
	out := map[string]negSample{}
	for _, p := range projects {
		for _, n := range gce.NEGs(p) {
			zone := path.Base(n.Zone)
			eps, ok := gce.Endpoints(p, zone, n.Name)
			if !ok {
				continue // deleted in between
			}
			out[p+"/"+zone+"/"+n.Name] = negSample{id: fmt.Sprint(n.Id), description: n.Description, endpoints: len(eps)}
		}
	}
	return out
}

// window is one step of the scenario: a switch or the changes after it.
type window struct {
	name       string
	start, end time.Time
	// quiet are the projects that must see no mutating GCE call in the window: converged tenants at a switch.
	quiet []string
	// baseline is each NEG's endpoint count when the window began; the test only adds endpoints within a window,
	// so no sample of it may hold fewer.
	baseline map[string]int
	// minEndpoints is the fewest endpoints each NEG held at a sample of the window.
	minEndpoints map[string]int
	samples      int
}

// negHistory is what the samples saw of one NEG.
type negHistory struct {
	ids, descriptions sets.Set[string]
	present           bool
	// vanished are the times a sample missed the NEG that the sample before had.
	vanished []time.Time
}

// resourceHistory is what the samples saw of one PangolinResource.
type resourceHistory struct {
	uids     sets.Set[types.UID]
	present  bool
	vanished []time.Time
}

// upgradeSampler reads the fake GCE's NEGs of the tenants' projects and the tenant's PangolinResources every
// upgradeSampleInterval, attributing each sample to the scenario's current window, and watches every change of the
// gated Deployment's Pods. It also keeps the states the test compares at each switch, for the report.
type upgradeSampler struct {
	t        *testing.T
	gce      *fakegce.Server
	calls    *gceCallLog
	ws       []*workload
	projects []string
	labels   map[string]string // project → the tenant's short name, for the report
	stopCh   chan struct{}
	done     chan struct{}

	mu        sync.Mutex
	windows   []*window
	negs      map[string]*negHistory
	resources map[string]*resourceHistory
	goneAt    map[string]time.Time // NEG key → when the test deleted its Service
	// awaiting are the NEG keys of Services deleted while a backend service used their NEGs: every sweep of either
	// build tries to delete them, which GCE refuses until the backend lets them go, so a quiet window allows those
	// delete calls.
	awaiting sets.Set[string]
	samples  int
	errors   []string
	kept     []keptSnapshot

	gate *gateWatch
}

type keptSnapshot struct {
	label string
	state keptState
}

// startUpgradeSampler samples the workloads' projects and PangolinResources and, when gated is not nil, the
// project of the gated Deployment's tenant and the gate of its Pods.
func startUpgradeSampler(t *testing.T, gce *fakegce.Server, calls *gceCallLog, ws []*workload, gated *rollout) *upgradeSampler {
	t.Helper()
	s := &upgradeSampler{t: t, gce: gce, calls: calls, ws: ws, labels: map[string]string{},
		stopCh: make(chan struct{}), done: make(chan struct{}),
		negs: map[string]*negHistory{}, resources: map[string]*resourceHistory{}, goneAt: map[string]time.Time{},
		awaiting: sets.New[string]()}
	for i, w := range ws {
		s.projects = append(s.projects, w.project)
		s.labels[w.project] = fmt.Sprintf("tenant%d", i+1)
	}
	if gated != nil {
		s.projects = append(s.projects, gated.w.project)
		s.labels[gated.w.project] = "rollout"
		s.gate = watchGate(t, gated)
	}
	go s.run()
	t.Cleanup(s.stop)
	return s
}

func (s *upgradeSampler) run() {
	defer close(s.done)
	tick := time.NewTicker(upgradeSampleInterval)
	defer tick.Stop()
	for {
		s.sample()
		select {
		case <-s.stopCh:
			return
		case <-s.t.Context().Done():
			return
		case <-tick.C:
		}
	}
}

func (s *upgradeSampler) stop() {
	select {
	case <-s.stopCh:
	default:
		close(s.stopCh)
	}
	<-s.done
}

// sample reads the NEGs and the PangolinResources once, for the window current when it starts. A failed list is
// recorded and skipped: it is no vanish.
func (s *upgradeSampler) sample() {
	s.mu.Lock()
	var win *window
	if n := len(s.windows); n > 0 {
		win = s.windows[n-1]
	}
	s.mu.Unlock()
	at := time.Now()
	negs := readNEGs(s.gce, s.projects)
	res, err := listPangolinResources(s.t.Context(), s.ws)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	if win != nil {
		win.samples++
	}
	for key, n := range negs {
		h := s.negs[key]
		if h == nil {
			h = &negHistory{ids: sets.New[string](), descriptions: sets.New[string]()}
			s.negs[key] = h
		}
		h.ids.Insert(n.id)
		h.descriptions.Insert(n.description)
		h.present = true
		if win != nil {
			if m, ok := win.minEndpoints[key]; !ok || n.endpoints < m {
				win.minEndpoints[key] = n.endpoints
			}
		}
	}
	for key, h := range s.negs {
		if _, ok := negs[key]; !ok && h.present {
			h.present = false
			h.vanished = append(h.vanished, at)
		}
	}
	if err != nil {
		s.errors = append(s.errors, fmt.Sprintf("%s: listing PangolinResources: %v", at.Format(time.StampMilli), err))
		return
	}
	for name, uid := range res {
		h := s.resources[name]
		if h == nil {
			h = &resourceHistory{uids: sets.New[types.UID]()}
			s.resources[name] = h
		}
		h.uids.Insert(uid)
		h.present = true
	}
	for name, h := range s.resources {
		if _, ok := res[name]; !ok && h.present {
			h.present = false
			h.vanished = append(h.vanished, at)
		}
	}
}

// begin starts a window: the NEGs' endpoint counts now are its baseline; quiet are the projects that must see no
// mutating GCE call until end.
func (s *upgradeSampler) begin(name string, quiet []string) {
	baseline := map[string]int{}
	for key, n := range readNEGs(s.gce, s.projects) {
		baseline[key] = n.endpoints
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, &window{name: name, start: time.Now(), quiet: quiet, baseline: baseline,
		minEndpoints: map[string]int{}})
}

// end closes the current window once a whole sample has been taken after the test's last wait in it, so even a
// window that converged at once has a sample of its end state.
func (s *upgradeSampler) end() {
	s.t.Helper()
	s.mu.Lock()
	from := s.samples
	s.mu.Unlock()
	err := wait.PollUntilContextTimeout(s.t.Context(), upgradeSampleInterval/4, time.Minute, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.samples >= from+2, nil
	})
	if err != nil {
		s.t.Fatalf("the sampler took no sample within a minute: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows[len(s.windows)-1].end = time.Now()
}

// keep reads the state a switch must keep and records it under label for the report.
func (s *upgradeSampler) keep(label string) keptState {
	s.t.Helper()
	k := readKeptState(s.t, s.gce, s.projects, s.ws)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = append(s.kept, keptSnapshot{label: label, state: k})
	return k
}

// expectGone marks the NEGs of the Service as going now: the test is about to delete it.
func (s *upgradeSampler) expectGone(w *workload, service string) {
	s.t.Helper()
	tr, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(w.ctx, translationName(service), metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range tr.Spec.Resources {
		s.goneAt[w.project+"/"+r.Zone+"/"+r.Name] = time.Now()
	}
}

// expectAwaiting marks the NEGs of the Service as going (expectGone) and as awaiting deletion: a backend service
// uses them, and the test is about to delete the Service.
func (s *upgradeSampler) expectAwaiting(w *workload, service string) {
	s.t.Helper()
	s.expectGone(w, service)
	tr, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(w.ctx, translationName(service), metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.awaiting == nil {
		w.awaiting = sets.New[string]()
	}
	for _, r := range tr.Spec.Resources {
		s.awaiting.Insert(w.project + "/" + r.Zone + "/" + r.Name)
		w.awaiting.Insert(r.Zone + "/" + r.Name)
	}
}

// expectRefusedDeletes allows the delete calls of the NEGs (keys "project/zone/name") in a quiet window, and
// excuses their owner from reading them: a build that no longer wants them tries to delete them, and GCE refuses
// while a backend service uses them.
func (s *upgradeSampler) expectRefusedDeletes(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaiting.Insert(keys...)
}

// waitObserved waits until the new owner of each project in agents (its leader-election identity or its shard, which
// a manager names in parentheses in its GCE User-Agent) has listed the endpoints of every NEG of the project (but
// those awaiting deletion, which no Translation declares) since
// the current window began. A new owner reads each NEG once and compares it with its Translation, so by then a
// mutation it found needed has been made, and is counted in the window; waiting for convergence alone would end
// the window of an already converged tenant before its new owner had looked.
func (s *upgradeSampler) waitObserved(agents map[string]string) {
	s.t.Helper()
	s.mu.Lock()
	since := s.windows[len(s.windows)-1].start
	awaiting := s.awaiting.Clone()
	s.mu.Unlock()
	why := "not looked yet"
	err := wait.PollUntilContextTimeout(s.t.Context(), upgradeSampleInterval, convergeTimeout, true, func(context.Context) (bool, error) {
		negs := readNEGs(s.gce, slices.Collect(maps.Keys(agents)))
		for project, agent := range agents {
			listed := s.calls.endpointsListed(project, "("+agent+")", since)
			for key := range negs {
				// A NEG awaiting deletion is no Translation's: no owner reads its endpoints.
				if p, neg, _ := strings.Cut(key, "/"); p == project && !listed.Has(neg) && !awaiting.Has(key) {
					why = fmt.Sprintf("%s has not listed the endpoints of NEG %s", agent, key)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatalf("the new owners did not read every NEG within %s: %v: %s", convergeTimeout, err, why)
	}
}

// check fails the test for what the samples saw go wrong.
func (s *upgradeSampler) check() {
	t := s.t
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range slices.Sorted(maps.Keys(s.negs)) {
		h := s.negs[key]
		if h.ids.Len() != 1 {
			t.Errorf("NEG %s had %d GCE ids %v: recreated", key, h.ids.Len(), sets.List(h.ids))
		}
		if h.descriptions.Len() != 1 {
			t.Errorf("NEG %s had %d descriptions %q", key, h.descriptions.Len(), sets.List(h.descriptions))
		}
		for _, at := range h.vanished {
			if gone, ok := s.goneAt[key]; !ok || at.Before(gone) {
				t.Errorf("NEG %s vanished at %s, in window %q, while still wanted", key, at.Format(time.StampMilli), s.windowAt(at))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.resources)) {
		h := s.resources[name]
		if h.uids.Len() != 1 {
			t.Errorf("PangolinResource %s had %d UIDs %v: replaced", name, h.uids.Len(), sets.List(h.uids))
		}
		for _, at := range h.vanished {
			t.Errorf("PangolinResource %s vanished at %s, in window %q", name, at.Format(time.StampMilli), s.windowAt(at))
		}
	}
	for _, win := range s.windows {
		for _, key := range slices.Sorted(maps.Keys(win.baseline)) {
			want := win.baseline[key]
			if _, ok := s.goneAt[key]; ok {
				continue
			}
			if got, ok := win.minEndpoints[key]; !ok {
				t.Errorf("window %q: no sample of NEG %s, which had %d endpoints when it began", win.name, key, want)
			} else if got < want {
				t.Errorf("window %q: NEG %s held %d endpoints at a sample, fewer than the %d it had when the window began", win.name, key, got, want)
			}
		}
		for _, p := range win.quiet {
			calls := slices.DeleteFunc(s.calls.mutations(p, win.start, win.end), func(c fakegce.CallRecord) bool {
				return c.Method == fakegce.MethodDelete && s.awaiting.Has(c.Project+"/"+c.Zone+"/"+c.Resource)
			})
			if len(calls) > 0 {
				t.Errorf("window %q: %d mutating GCE call(s) in the converged %s's project, want 0:\n%s", win.name, len(calls), s.labels[p], formatCalls(calls))
			}
		}
	}
	if s.gate != nil {
		s.gate.check(t)
	}
}

// windowAt names the window that was current at t.
func (s *upgradeSampler) windowAt(at time.Time) string {
	name := "before the first window"
	for _, win := range s.windows {
		if !at.Before(win.start) {
			name = win.name
		}
	}
	return name
}

func formatCalls(calls []fakegce.CallRecord) string {
	var lines []string
	for _, c := range calls {
		lines = append(lines, fmt.Sprintf("  %s %s %s/%s %s (%d endpoints)", c.Time.Format(time.StampMilli), c.Method, c.Project, c.Zone, c.Resource, c.Endpoints))
	}
	return strings.Join(lines, "\n")
}

// report logs what a release records of the suite (docs/release.md): per window its wall time, mutating GCE
// calls, samples and each NEG's fewest endpoints; each NEG's GCE id and each PangolinResource's UID at every kept
// state; the gate's Pods; and the error-level lines of the managers' logs.
func (s *upgradeSampler) report(managers ...*manager) {
	t := s.t
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	negKeys := slices.Sorted(maps.Keys(s.negs))
	short := map[string]string{}
	for i, key := range negKeys {
		short[key] = fmt.Sprintf("N%d", i+1)
	}
	fmt.Fprintf(&b, "upgrade report (%d samples, every %s):\n", s.samples, upgradeSampleInterval)
	fmt.Fprintf(&b, "  %-40s %8s  %-30s %7s  %s\n", "window", "wall", "GCE mutations", "samples", "fewest endpoints per NEG (baseline→min)")
	for _, win := range s.windows {
		var mutations []string
		for _, p := range s.projects {
			mutations = append(mutations, fmt.Sprintf("%s %d", s.labels[p], len(s.calls.mutations(p, win.start, win.end))))
		}
		var mins []string
		for _, key := range negKeys {
			m, ok := win.minEndpoints[key]
			if !ok {
				continue
			}
			if base, ok := win.baseline[key]; ok {
				mins = append(mins, fmt.Sprintf("%s %d→%d", short[key], base, m))
			} else {
				mins = append(mins, fmt.Sprintf("%s new→%d", short[key], m))
			}
		}
		fmt.Fprintf(&b, "  %-40s %8s  %-30s %7d  %s\n", win.name, win.end.Sub(win.start).Round(100*time.Millisecond),
			strings.Join(mutations, ", "), win.samples, strings.Join(mins, " "))
	}
	var labels []string
	for _, k := range s.kept {
		labels = append(labels, k.label)
	}
	fmt.Fprintf(&b, "  NEGs: GCE id at %s (- absent)\n", strings.Join(labels, " | "))
	for _, key := range negKeys {
		project, rest, _ := strings.Cut(key, "/")
		var ids []string
		for _, k := range s.kept {
			id, ok := k.state.negs[key]
			if !ok {
				id = "-"
			}
			ids = append(ids, id)
		}
		fmt.Fprintf(&b, "    %-4s %-8s %s: %s\n", short[key], s.labels[project], rest, compactRuns(ids))
	}
	fmt.Fprintf(&b, "  PangolinResources: UID at %s (- absent)\n", strings.Join(labels, " | "))
	for _, name := range slices.Sorted(maps.Keys(s.resources)) {
		var uids []string
		for _, k := range s.kept {
			uid, ok := k.state.resources[name]
			if !ok {
				uid = "-"
			}
			uids = append(uids, string(uid))
		}
		fmt.Fprintf(&b, "    %s: %s\n", name, compactRuns(uids))
	}
	if s.gate != nil {
		fmt.Fprintf(&b, "  %s\n", s.gate.summary())
	}
	if len(s.errors) > 0 {
		fmt.Fprintf(&b, "  sampler errors (%d): %s\n", len(s.errors), strings.Join(s.errors[:min(len(s.errors), 5)], "; "))
	}
	for _, m := range managers {
		log, err := os.ReadFile(m.logPath)
		if err != nil {
			fmt.Fprintf(&b, "  manager %s: reading the log: %v\n", m.name, err)
			continue
		}
		lines := errorLogLine.FindAll(log, -1)
		fmt.Fprintf(&b, "  manager %s: %d error-level log line(s)\n", m.name, len(lines))
		for _, l := range lines[:min(len(lines), 10)] {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	t.Log(b.String())
}

// compactRuns joins values, writing a run of equal ones once with its length: "x ×4 | y".
func compactRuns(values []string) string {
	var parts []string
	for i := 0; i < len(values); {
		j := i
		for j < len(values) && values[j] == values[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", values[i], j-i))
		} else {
			parts = append(parts, values[i])
		}
		i = j
	}
	return strings.Join(parts, " | ")
}

// gateWatch follows every change of the gated Deployment's Pods through an informer (which delivers each change in
// order) and records any Pod whose NEG readiness gate condition, once True, is seen False or gone.
type gateWatch struct {
	mu       sync.Mutex
	everTrue map[types.UID]string // → Pod name
	flips    []string
}

func watchGate(t *testing.T, r *rollout) *gateWatch {
	t.Helper()
	g := &gateWatch{everTrue: map[types.UID]string{}}
	factory := informers.NewSharedInformerFactoryWithOptions(r.w.kube, 0, informers.WithNamespace(r.w.appNS))
	informer := factory.Core().V1().Pods().Informer()
	see := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		c := podCondition(pod, negReadyGate)
		g.mu.Lock()
		defer g.mu.Unlock()
		switch _, wasTrue := g.everTrue[pod.UID]; {
		case c != nil && c.Status == corev1.ConditionTrue:
			g.everTrue[pod.UID] = pod.Name
		case wasTrue:
			g.flips = append(g.flips, fmt.Sprintf("%s at %s: %+v", pod.Name, time.Now().Format(time.StampMilli), c))
		}
	}
	watchAddsAndUpdates(t, factory, informer, "Pod", see)
	return g
}

func (g *gateWatch) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range g.flips {
		t.Errorf("a Pod's %s condition went from True back: %s", negReadyGate, f)
	}
	if len(g.everTrue) == 0 {
		t.Errorf("no Pod of the gated Deployment ever had its %s condition True", negReadyGate)
	}
}

func (g *gateWatch) summary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("gated Deployment: %d Pods had %s True, %d went back", len(g.everTrue), negReadyGate, len(g.flips))
}

// --- what a switch keeps -----------------------------------------------------------------------------------------

// keptState is what a switch must leave as it was: the NEGs of the sampled projects with their GCE ids, the tenant's
// PangolinResources with their UIDs, and its Translations as field paths to values.
type keptState struct {
	negs         map[string]string            // "project/zone/name" → GCE id
	resources    map[string]types.UID         // PangolinResource "namespace/name" → UID
	translations map[string]map[string]string // Translation "namespace/name" → field path → value
}

func readKeptState(t testing.TB, gce *fakegce.Server, projects []string, ws []*workload) keptState {
	t.Helper()
	k := keptState{negs: map[string]string{}, translations: map[string]map[string]string{}}
	for key, n := range readNEGs(gce, projects) {
		k.negs[key] = n.id
	}
	var err error
	if k.resources, err = listPangolinResources(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(controlPlane.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		trs, err := client.Resource(mpv1alpha1.SchemeGroupVersion.WithResource("translations")).Namespace(w.appNS).
			List(w.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range trs.Items {
			k.translations[w.appNS+"/"+trs.Items[i].GetName()] = translationFields(&trs.Items[i])
		}
	}
	return k
}

// translationFields flattens a Translation, read as the API server stores it (unstructured, so a field this test's
// types do not know is kept), to "path → value" leaves; its status and what the API server changes on every write
// (resourceVersion, managedFields, generation) are left out.
func translationFields(tr *unstructured.Unstructured) map[string]string {
	obj := tr.DeepCopy().Object
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
		delete(md, "managedFields")
		delete(md, "generation")
	}
	out := map[string]string{}
	var flatten func(path string, v any)
	flatten = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if len(v) == 0 {
				out[path] = "{}"
			}
			for k, x := range v {
				flatten(path+"["+k+"]", x)
			}
		case []any:
			if len(v) == 0 {
				out[path] = "[]"
			}
			for i, x := range v {
				flatten(fmt.Sprintf("%s[%d]", path, i), x)
			}
		default:
			out[path] = fmt.Sprint(v)
		}
	}
	flatten("", obj)
	return out
}

// compareKept fails the test for every NEG, PangolinResource or Translation (field) of before that after lacks or
// holds differently, and logs the Translation fields that after adds (a new build may add one).
func compareKept(t *testing.T, what string, before, after keptState) {
	t.Helper()
	for key, id := range before.negs {
		switch got, ok := after.negs[key]; {
		case !ok:
			t.Errorf("%s: NEG %s (id %s) is gone: deleted or renamed", what, key, id)
		case got != id:
			t.Errorf("%s: NEG %s was recreated (id %s, was %s)", what, key, got, id)
		}
	}
	for name, uid := range before.resources {
		if got, ok := after.resources[name]; !ok || got != uid {
			t.Errorf("%s: PangolinResource %s: UID %q, was %s (replaced or gone)", what, name, got, uid)
		}
	}
	for name, fields := range before.translations {
		afterFields, ok := after.translations[name]
		if !ok {
			t.Errorf("%s: Translation %s is gone", what, name)
			continue
		}
		var lost, changed, added []string
		for path, v := range fields {
			switch got, ok := afterFields[path]; {
			case !ok:
				lost = append(lost, path+"="+v)
			case got != v:
				changed = append(changed, fmt.Sprintf("%s: %s → %s", path, v, got))
			}
		}
		for path, v := range afterFields {
			if _, ok := fields[path]; !ok {
				added = append(added, path+"="+v)
			}
		}
		slices.Sort(lost)
		slices.Sort(changed)
		slices.Sort(added)
		if len(lost) > 0 || len(changed) > 0 {
			t.Errorf("%s: Translation %s lost fields %q and changed %q", what, name, lost, changed)
		}
		if len(added) > 0 {
			t.Logf("%s: Translation %s gained fields %q", what, name, added)
		}
	}
}
