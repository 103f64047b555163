package frontdoor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbspec"
)

// Wire strings of the generated objects.
const (
	// LabelFrontDoor names the kind of front door that generated an object ("mcs", "service",
	// "multiclusteringress").
	LabelFrontDoor = "lbfed.io/front-door"
	// LabelFrontDoorName names the front door object (same namespace) that generated an object
	// (NameLabel: hashed when the name is longer than a label value). Select the generated
	// BackendGroups of one front door with both labels, e.g. in an OverridePolicy's
	// resourceSelectors for per-cluster weights.
	LabelFrontDoorName = "lbfed.io/front-door-name"
	// DefaultDriver is the LoadBalancerDriver the generated LoadBalancers use by default: a
	// shared ("lbcf-" prefixed) driver in kube-system, so that front doors in every namespace
	// reach it.
	DefaultDriver = lbcfv1beta1.SystemDriverPrefix + "radware"
	// DefaultWeight is the generated BackendGroups' spec.parameters.weight. An OverridePolicy
	// replacing /spec/parameters/weight sets a member's weight (radware: 1–48).
	DefaultWeight = "1"
)

// ConditionLoadBalancer is the front door's condition (where its kind has conditions): True once
// every generated LoadBalancer is created on the device.
const ConditionLoadBalancer = "LoadBalancerReady"

// Reasons of the front doors' conditions and events.
const (
	ReasonProgrammed      = "Programmed"
	ReasonPending         = "Pending"
	ReasonInvalid         = "Invalid"
	ReasonConflict        = "Conflict"
	ReasonNameTaken       = "NameTaken"
	ReasonServiceNotFound = "ServiceNotFound"
	ReasonPortsSkipped    = "PortsSkipped"
	ReasonNoClusters      = "NoClusters"
	ReasonSyncFailed      = "SyncFailed"
)

// Refusal is a front door that cannot be served as written (bad input, a conflict, a name taken
// by someone else): reported in a condition and an event, retried only when something changes.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Message }

// Refusef builds a Refusal.
func Refusef(reason, format string, args ...any) error {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// AsRefusal returns err's Refusal, if it is one.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// Door is the front door object on the Karmada API server (a MultiClusterService, a Service, a
// MultiClusterIngress): every generated object carries its labels and a controller owner
// reference to it, so deleting it deletes them through the garbage collector, and LBCF's
// finalizers clean the device once.
type Door struct {
	// Kind is the LabelFrontDoor value of the generated objects ("mcs", "service",
	// "multiclusteringress"), and the prefix of the names Sync gives them.
	Kind string
	// GVK of Object, for the owner reference.
	GVK    schema.GroupVersionKind
	Object client.Object
}

// Labels are the labels of every object generated for the front door.
func (d Door) Labels() map[string]string {
	return map[string]string{LabelFrontDoor: d.Kind, LabelFrontDoorName: NameLabel(d.Object.GetName())}
}

// NameLabel is LabelFrontDoorName's value for a front door's name: the name, or a hash of it
// when it is longer than a label value (a MultiClusterIngress's name may be).
func NameLabel(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "h-" + hex.EncodeToString(sum[:10])
}

// Owns tells whether o was generated for this front door: its labels and an owner reference to
// it, by UID. A Door whose Object has no UID (a front door already gone, known by name only)
// owns what any front door of its kind and name generated.
func (d Door) Owns(o client.Object) bool {
	l := o.GetLabels()
	if l[LabelFrontDoor] != d.Kind || l[LabelFrontDoorName] != NameLabel(d.Object.GetName()) {
		return false
	}
	uid := d.Object.GetUID()
	for _, r := range o.GetOwnerReferences() {
		if (uid != "" && r.UID == uid) || (uid == "" && r.Kind == d.GVK.Kind && r.Name == d.Object.GetName()) {
			return true
		}
	}
	return false
}

// Generated tells whether o carries a front door's labels, whichever.
func Generated(o client.Object) bool { return o.GetLabels()[LabelFrontDoor] != "" }

// OwnerRef is the controller owner reference every generated object carries.
func (d Door) OwnerRef() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: d.GVK.GroupVersion().String(), Kind: d.GVK.Kind, Name: d.Object.GetName(),
		UID: d.Object.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// Meta is the metadata of a generated object of the given name: the front door's namespace,
// labels and owner reference.
func (d Door) Meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: d.Object.GetNamespace(), Name: name, Labels: d.Labels(),
		OwnerReferences: []metav1.OwnerReference{d.OwnerRef()}}
}

func (d Door) String() string {
	return d.GVK.Kind + " " + d.Object.GetNamespace() + "/" + d.Object.GetName()
}

// Port is one exposed Service port: a virtual server VIP:Port/Protocol over the pods' TargetPort.
type Port struct {
	Port       int32
	Protocol   corev1.Protocol
	TargetPort int32
}

func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) }

// Want is what a front door asks for.
type Want struct {
	VIP    netip.Addr
	Method string
	// Selector selects the backend pods in every member (the Service's spec.selector).
	Selector map[string]string
	Ports    []Port
	// Held are ports that cannot be translated now (an unresolvable target port): what was
	// generated for them stays as it is and stays placed, as for input refused as written.
	Held []Port
	// Clusters place the generated BackendGroups. Empty: the placement is left as it is (none
	// is created): a Service whose binding is missing or empty is unobserved, not gone.
	Clusters []string
}

// Outcome is the state of a front door's generated objects after Sync.
type Outcome struct {
	// LoadBalancers are the generated LoadBalancers' names, in port order.
	LoadBalancers []string
	// Created: every generated LoadBalancer reports Created=True.
	Created bool
	// Serving: at least one does: the VIP is on the device. Status shows the VIP while it is
	// served, so that adding a port does not withdraw it from status until the new port is up.
	Serving bool
	// Waiting says what is not done yet, for the condition message.
	Waiting []string
}

// Kit translates front doors into LBCF objects on the Karmada API server, which the federation
// controller programs on the device.
type Kit struct {
	Client client.Client
	// Reader reads workloads to resolve named target ports (uncached: the kit needs them
	// rarely); nil refuses named target ports.
	Reader   client.Reader
	Recorder events.EventRecorder
	// Driver is the generated LoadBalancers' spec.lbDriver (DefaultDriver when empty).
	Driver string
}

// Name is the deterministic name of a front door's generated objects for one port:
// <kind>-<name>-<protocol>-<port>, shortened with a hash to stay a valid label value (63), as
// LBCF puts LoadBalancer and BackendGroup names into BackendRecord labels.
func Name(kind, name string, p Port) string {
	return shorten(fmt.Sprintf("%s-%s-%s-%d", kind, name, strings.ToLower(string(p.Protocol)), p.Port))
}

// PolicyName is the name of a front door's PropagationPolicy.
func PolicyName(kind, name string) string { return shorten(kind + "-" + name) }

// HashName is a deterministic name for a generated object that stands for parts: the front
// door's name (shortened to 40 characters) and a hash of the parts.
func HashName(name string, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-.")
	}
	return name + "-" + hex.EncodeToString(sum[:5])
}

func shorten(s string) string {
	if len(s) <= 63 {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:54], "-.") + "-" + hex.EncodeToString(h[:])[:8]
}

// lbSpec is the Radware driver's lbSpec (lbspec) of one port.
func lbSpec(w Want, p Port) map[string]string {
	return map[string]string{lbspec.KeyVIP: w.VIP.String(), lbspec.KeyPort: strconv.Itoa(int(p.Port)),
		lbspec.KeyProtocol: string(p.Protocol), lbspec.KeyMethod: w.Method}
}

// Sync makes the front door's generated objects match w: one LoadBalancer and one BackendGroup per
// port, one PropagationPolicy for the BackendGroups, and nothing else. It refuses (a *Refusal)
// when a VIP:port/protocol is held by an older LoadBalancer of someone else, or a name it needs
// is taken by an object it did not generate; it then writes nothing new and leaves what it had
// generated, except a LoadBalancer that lost a race for a VIP:port.
func (k *Kit) Sync(ctx context.Context, d Door, w Want) (Outcome, error) {
	var out Outcome
	ns := d.Object.GetNamespace()
	for _, p := range w.Ports {
		if _, err := lbspec.Parse(lbSpec(w, p)); err != nil {
			return out, Refusef(ReasonInvalid, "port %s: %v", p, err)
		}
	}
	if err := k.checkConflicts(ctx, d, w); err != nil {
		return out, err
	}
	names := make([]string, len(w.Ports))
	for i, p := range w.Ports {
		names[i] = Name(d.Kind, d.Object.GetName(), p)
	}
	// Every name first, so that a taken one refuses the whole front door before anything is written.
	for _, n := range names {
		for _, o := range []client.Object{&lbcfv1beta1.LoadBalancer{}, &lbcfv1beta1.BackendGroup{}} {
			if err := k.checkName(ctx, d, o, client.ObjectKey{Namespace: ns, Name: n}); err != nil {
				return out, err
			}
		}
	}
	if err := k.checkName(ctx, d, &policyv1alpha1.PropagationPolicy{}, client.ObjectKey{Namespace: ns, Name: PolicyName(d.Kind, d.Object.GetName())}); err != nil {
		return out, err
	}
	out.LoadBalancers = names
	out.Created = true
	for i, p := range w.Ports {
		lb, err := k.SyncLoadBalancer(ctx, d, names[i], lbSpec(w, p), w.VIP.String()+":"+p.String())
		if err != nil {
			return out, err
		}
		if lb != nil && lb.IsCreated() {
			out.Serving = true
		} else {
			out.Created = false
			out.Waiting = append(out.Waiting, "LoadBalancer "+names[i]+" not created yet"+lbMessage(lb))
		}
		g := Group{LoadBalancer: names[i], InitialParameters: map[string]string{"weight": DefaultWeight}, Pods: lbcfv1beta1.PodBackend{
			Ports:   []lbcfv1beta1.PortSelector{{Port: p.TargetPort, Protocol: string(p.Protocol)}},
			ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: w.Selector},
		}}
		if err := k.SyncBackendGroup(ctx, d, names[i], g); err != nil {
			return out, err
		}
	}
	held, err := k.heldNames(ctx, d, w.Held)
	if err != nil {
		return out, err
	}
	if len(w.Clusters) > 0 {
		if err := k.SyncPolicy(ctx, d, PolicyName(d.Kind, d.Object.GetName()), append(slices.Clone(names), held...), w.Clusters); err != nil {
			return out, err
		}
	} else {
		out.Waiting = append(out.Waiting, "no member cluster to place the backends on yet")
	}
	if err := k.removeStale(ctx, d, append(slices.Clone(names), held...)); err != nil {
		return out, err
	}
	return out, nil
}

// heldNames lists the generated BackendGroups of the held ports that exist.
func (k *Kit) heldNames(ctx context.Context, d Door, ports []Port) ([]string, error) {
	var out []string
	for _, p := range ports {
		n := Name(d.Kind, d.Object.GetName(), p)
		bg := &lbcfv1beta1.BackendGroup{}
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: d.Object.GetNamespace(), Name: n}, bg); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get BackendGroup %s: %w", n, err)
		}
		if d.Owns(bg) {
			out = append(out, n)
		}
	}
	return out, nil
}

func lbMessage(lb *lbcfv1beta1.LoadBalancer) string {
	if lb == nil {
		return ""
	}
	if c := lb.Status.Condition(lbcfv1beta1.LBCreated); c != nil && c.Message != "" {
		return " (" + c.Message + ")"
	}
	return ""
}

// claimKey is what two LoadBalancers must not share on one device.
type claimKey struct {
	vip, port, protocol string
}

func keyOf(spec map[string]string) (claimKey, bool) {
	if spec[lbspec.KeyVIP] == "" || spec[lbspec.KeyPort] == "" {
		return claimKey{}, false
	}
	proto := strings.ToUpper(strings.TrimSpace(spec[lbspec.KeyProtocol]))
	if proto == "" {
		proto = string(corev1.ProtocolTCP)
	}
	return claimKey{strings.TrimSpace(spec[lbspec.KeyVIP]), strings.TrimSpace(spec[lbspec.KeyPort]), proto}, true
}

// checkConflicts refuses the front door when another LoadBalancer (a front door's or a user's)
// already holds one of its VIP:port/protocol and is older than this front door's own
// LoadBalancer for it (a front door without one yet is the newest). Ties go by namespace/name.
// A LoadBalancer of this front door that lost such a race is deleted; the others stay (a port
// added on a taken VIP:port must not take the serving ports down).
func (k *Kit) checkConflicts(ctx context.Context, d Door, w Want) error {
	want := map[claimKey]Port{}
	for _, p := range w.Ports {
		key, _ := keyOf(lbSpec(w, p))
		want[key] = p
	}
	list := &lbcfv1beta1.LoadBalancerList{}
	// Read only: no copies of every LoadBalancer of the federation.
	if err := k.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list LoadBalancers: %w", err)
	}
	mine := map[claimKey]*lbcfv1beta1.LoadBalancer{}
	for i := range list.Items {
		lb := &list.Items[i]
		if lb.Namespace == d.Object.GetNamespace() && d.Owns(lb) {
			if key, ok := keyOf(lb.Spec.LBSpec); ok {
				mine[key] = lb
			}
		}
	}
	var refusal error
	for i := range list.Items {
		other := &list.Items[i]
		key, ok := keyOf(other.Spec.LBSpec)
		if !ok || (other.Namespace == d.Object.GetNamespace() && d.Owns(other)) || other.DeletionTimestamp != nil {
			continue
		}
		p, clash := want[key]
		if !clash {
			continue
		}
		own := mine[key]
		if own != nil && older(own, other) {
			continue
		}
		if own != nil && own.DeletionTimestamp == nil {
			if err := k.Client.Delete(ctx, own, client.Preconditions{UID: ptr.To(own.UID)}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete LoadBalancer %s that lost %s:%s: %w", own.Name, w.VIP, p, err)
			}
		}
		if refusal == nil {
			refusal = Refusef(ReasonConflict, "%s:%s is already served by %s", w.VIP, p, Holder(other))
		}
	}
	return refusal
}

// Holder names a LoadBalancer that holds a claim, with the front door that generated it, if any,
// for a conflict's message.
func Holder(lb *lbcfv1beta1.LoadBalancer) string {
	holder := "LoadBalancer " + lb.Namespace + "/" + lb.Name
	if l := lb.Labels; l[LabelFrontDoor] != "" {
		holder += fmt.Sprintf(" (front door %s %s/%s)", l[LabelFrontDoor], lb.Namespace, l[LabelFrontDoorName])
	}
	return holder
}

// Serving tells whether one of the front door's LoadBalancers is created on the device (for
// status after a refusal: what was generated before stays).
func (k *Kit) Serving(ctx context.Context, d Door) (bool, error) {
	list := &lbcfv1beta1.LoadBalancerList{}
	if err := k.Client.List(ctx, list, client.InNamespace(d.Object.GetNamespace()), client.MatchingLabels(d.Labels())); err != nil {
		return false, fmt.Errorf("list generated LoadBalancers: %w", err)
	}
	for i := range list.Items {
		if d.Owns(&list.Items[i]) && list.Items[i].DeletionTimestamp == nil && list.Items[i].IsCreated() {
			return true, nil
		}
	}
	return false, nil
}

// older orders two claims on one VIP:port: the earlier LoadBalancer, then the smaller namespace/name.
func older(a, b *lbcfv1beta1.LoadBalancer) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// checkName refuses a name held by an object this front door did not generate.
func (k *Kit) checkName(ctx context.Context, d Door, o client.Object, key client.ObjectKey) error {
	if err := k.Client.Get(ctx, key, o); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get %T %s: %w", o, key, err)
	}
	if d.Owns(o) {
		return nil
	}
	kind := strings.TrimPrefix(fmt.Sprintf("%T", o), "*")
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if Generated(o) && o.GetLabels()[LabelFrontDoor] == d.Kind && o.GetLabels()[LabelFrontDoorName] == NameLabel(d.Object.GetName()) {
		// A previous front door of the same name: the garbage collector removes it.
		return Refusef(ReasonPending, "%s %s of a previous %s is still being deleted", kind, key, d.GVK.Kind)
	}
	return Refusef(ReasonNameTaken, "%s %s exists and was not generated for this %s: rename or remove it", kind, key, d.GVK.Kind)
}

// DriverKey identifies the driver a LoadBalancer of namespace uses: shared ("lbcf-") drivers
// live in kube-system and serve every namespace, others belong to the LoadBalancer's namespace.
// LoadBalancers of one driver share its device, so their claims may conflict.
func DriverKey(namespace, driver string) string {
	if strings.HasPrefix(driver, lbcfv1beta1.SystemDriverPrefix) {
		return lbcfv1beta1.SystemNamespace + "/" + driver
	}
	return namespace + "/" + driver
}

func (k *Kit) driver() string {
	if k.Driver == "" {
		return DefaultDriver
	}
	return k.Driver
}

func (k *Kit) event(d Door, related client.Object, reason, format string, args ...any) {
	if k.Recorder != nil {
		k.Recorder.Eventf(d.Object, related, corev1.EventTypeNormal, reason, "Sync", format, args...)
	}
}

// notOurs refuses an existing object of a needed name that this front door did not generate.
func notOurs(d Door, o client.Object) error {
	if d.Owns(o) {
		return nil
	}
	kind := strings.TrimPrefix(fmt.Sprintf("%T", o), "*")
	kind = kind[strings.LastIndex(kind, ".")+1:]
	return Refusef(ReasonNameTaken, "%s %s/%s exists and was not generated for this %s: left alone", kind, o.GetNamespace(), o.GetName(), d.GVK.Kind)
}

// SyncLoadBalancer creates the front door's LoadBalancer name of the Kit's driver with spec (about
// says what it serves, for the event), or replaces it when its (immutable) driver or lbSpec
// changed: the old one is deleted first (LBCF removes it from the device) and the new one
// created once it is gone. It returns the current object, nil while it does not exist (the
// deletion of the LoadBalancer is the event to sync again on). A LoadBalancer of that name the
// front door did not generate is refused (ReasonNameTaken) and left alone.
func (k *Kit) SyncLoadBalancer(ctx context.Context, d Door, name string, spec map[string]string, about string) (*lbcfv1beta1.LoadBalancer, error) {
	lb := &lbcfv1beta1.LoadBalancer{}
	err := k.Client.Get(ctx, client.ObjectKey{Namespace: d.Object.GetNamespace(), Name: name}, lb)
	switch {
	case apierrors.IsNotFound(err):
		lb = &lbcfv1beta1.LoadBalancer{ObjectMeta: d.Meta(name), Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: k.driver(), LBSpec: spec}}
		if err := k.Client.Create(ctx, lb); err != nil {
			return nil, fmt.Errorf("create LoadBalancer %s: %w", name, err)
		}
		k.event(d, lb, "LoadBalancerCreated", "LoadBalancer %s for %s", name, about)
		return lb, nil
	case err != nil:
		return nil, fmt.Errorf("get LoadBalancer %s: %w", name, err)
	}
	if err := notOurs(d, lb); err != nil {
		return nil, err
	}
	if lb.DeletionTimestamp != nil {
		return nil, nil
	}
	if lb.Spec.LBDriver != k.driver() || !maps.Equal(lb.Spec.LBSpec, spec) {
		if err := k.Client.Delete(ctx, lb, client.Preconditions{UID: &lb.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("replace LoadBalancer %s: %w", name, err)
		}
		k.event(d, lb, "LoadBalancerReplaced", "LoadBalancer %s: driver or lbSpec changed (both immutable), deleting it to create it anew", name)
		return nil, nil
	}
	return lb, nil
}

// Group is a generated BackendGroup: the pods it selects on one LoadBalancer.
type Group struct {
	LoadBalancer string
	Pods         lbcfv1beta1.PodBackend
	// Parameters are the front door's: set on every sync.
	Parameters map[string]string
	// InitialParameters are set on creation only (a weight changed on the template stays).
	InitialParameters map[string]string
}

// SyncBackendGroup makes the BackendGroup name select g's pods on g's LoadBalancer. Only the
// fields the front door owns are written: admission defaults, Karmada's labels and the
// parameters it does not own survive. A BackendGroup of that name the front door did not
// generate is refused (ReasonNameTaken) and left alone.
func (k *Kit) SyncBackendGroup(ctx context.Context, d Door, name string, g Group) error {
	bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: d.Object.GetNamespace(), Name: name}}
	op, err := controllerutil.CreateOrUpdate(ctx, k.Client, bg, func() error {
		if bg.CreationTimestamp.IsZero() {
			bg.Spec.Parameters = maps.Clone(g.InitialParameters)
		} else if err := notOurs(d, bg); err != nil {
			return err
		}
		for key, v := range g.Parameters {
			if bg.Spec.Parameters == nil {
				bg.Spec.Parameters = map[string]string{}
			}
			bg.Spec.Parameters[key] = v
		}
		setLabels(bg, d.Labels())
		setOwner(bg, d.OwnerRef())
		bg.Spec.LoadBalancers = []string{g.LoadBalancer}
		bg.Spec.LBName = nil
		bg.Spec.Service = nil
		bg.Spec.Static = nil
		bg.Spec.Pods = g.Pods.DeepCopy()
		return nil
	})
	if err != nil {
		return fmt.Errorf("BackendGroup %s: %w", name, err)
	}
	if op == controllerutil.OperationResultCreated {
		k.event(d, bg, "BackendGroupCreated", "BackendGroup %s: %s", name, podsString(g.Pods))
	}
	return nil
}

func podsString(p lbcfv1beta1.PodBackend) string {
	s := "pods"
	if p.ByLabel != nil {
		s += fmt.Sprintf(" %v", p.ByLabel.Selector)
	}
	for _, port := range p.Ports {
		s += fmt.Sprintf(" on port %d/%s", port.Port, port.Protocol)
	}
	return s
}

// SyncPolicy keeps the PropagationPolicy name placing the generated BackendGroups groups on the
// clusters. Only the selectors and the cluster names are the front door's: Karmada's admission
// defaults the selectors' namespace (set here as it would, so that an unchanged policy is not
// rewritten) and adds tolerations, which stay. A policy of that name the front door did not
// generate is refused (ReasonNameTaken) and left alone.
func (k *Kit) SyncPolicy(ctx context.Context, d Door, name string, groups []string, clusters []string) error {
	pp := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: d.Object.GetNamespace(), Name: name}}
	clusters = slices.Clone(clusters)
	sort.Strings(clusters)
	_, err := controllerutil.CreateOrUpdate(ctx, k.Client, pp, func() error {
		if !pp.CreationTimestamp.IsZero() {
			if err := notOurs(d, pp); err != nil {
				return err
			}
		}
		setLabels(pp, d.Labels())
		setOwner(pp, d.OwnerRef())
		pp.Spec.ResourceSelectors = nil
		for _, g := range groups {
			pp.Spec.ResourceSelectors = append(pp.Spec.ResourceSelectors, policyv1alpha1.ResourceSelector{
				APIVersion: lbcfv1beta1.APIVersion, Kind: lbcfv1beta1.KindBackendGroup, Namespace: pp.Namespace, Name: g})
		}
		if pp.Spec.Placement.ClusterAffinity == nil {
			pp.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{}
		}
		pp.Spec.Placement.ClusterAffinity.ClusterNames = clusters
		return nil
	})
	if err != nil {
		return fmt.Errorf("PropagationPolicy %s: %w", pp.Name, err)
	}
	return nil
}

// Owned lists the objects of list's kind generated for the front door (its labels, then its
// owner reference: objects without the labels are never looked at).
func (k *Kit) Owned(ctx context.Context, d Door, list client.ObjectList) ([]client.Object, error) {
	if err := k.Client.List(ctx, list, client.InNamespace(d.Object.GetNamespace()), client.MatchingLabels(d.Labels())); err != nil {
		return nil, fmt.Errorf("list generated %T: %w", list, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, it := range items {
		if o := it.(client.Object); d.Owns(o) {
			out = append(out, o)
		}
	}
	return out, nil
}

// Remove deletes the front door's generated objects of the lists' kinds that keep does not keep
// (nil keeps none) and that are not being deleted already.
func (k *Kit) Remove(ctx context.Context, d Door, keep func(client.Object) bool, lists ...client.ObjectList) error {
	for _, list := range lists {
		objs, err := k.Owned(ctx, d, list)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if (keep != nil && keep(o)) || o.GetDeletionTimestamp() != nil {
				continue
			}
			if err := k.Client.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %T %s: %w", o, o.GetName(), err)
			}
			ctrl.LoggerFrom(ctx).V(1).Info("deleted generated object", "kind", fmt.Sprintf("%T", o), "object", client.ObjectKeyFromObject(o))
		}
	}
	return nil
}

// removeStale deletes this front door's LoadBalancers and BackendGroups not in keep (ports
// removed). The PropagationPolicy only goes with Release.
func (k *Kit) removeStale(ctx context.Context, d Door, keep []string) error {
	return k.Remove(ctx, d, func(o client.Object) bool { return slices.Contains(keep, o.GetName()) },
		&lbcfv1beta1.LoadBalancerList{}, &lbcfv1beta1.BackendGroupList{})
}

// Release deletes every object generated for the front door (it no longer asks for a load
// balancer, or lost a conflict). LBCF's finalizers remove the device's objects once. It returns
// whether anything was left to delete.
func (k *Kit) Release(ctx context.Context, d Door) (bool, error) {
	if err := k.Remove(ctx, d, nil, &lbcfv1beta1.LoadBalancerList{}, &lbcfv1beta1.BackendGroupList{}, &policyv1alpha1.PropagationPolicyList{}); err != nil {
		return false, err
	}
	left := &lbcfv1beta1.LoadBalancerList{}
	if err := k.Client.List(ctx, left, client.InNamespace(d.Object.GetNamespace()), client.MatchingLabels(d.Labels())); err != nil {
		return false, err
	}
	return len(left.Items) > 0, nil
}

func setLabels(o client.Object, want map[string]string) {
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range want {
		l[k] = v
	}
	o.SetLabels(l)
}

func setOwner(o client.Object, ref metav1.OwnerReference) {
	refs := o.GetOwnerReferences()
	for i := range refs {
		if refs[i].UID == ref.UID {
			refs[i] = ref
			o.SetOwnerReferences(refs)
			return
		}
	}
	o.SetOwnerReferences(append(refs, ref))
}

// Condition is the front door's ConditionLoadBalancer after Sync returned out and err, with the
// ports that could not be exposed.
func Condition(generation int64, out Outcome, skipped []string, err error) metav1.Condition {
	c := metav1.Condition{Type: ConditionLoadBalancer, ObservedGeneration: generation}
	switch r, refused := AsRefusal(err); {
	case refused:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, r.Reason, r.Message
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonSyncFailed, err.Error()
	case !out.Created || len(out.Waiting) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonPending, strings.Join(out.Waiting, "; ")
		if out.Created {
			c.Status = metav1.ConditionTrue // the VIP is on the device; backends are still to come
		}
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonProgrammed, "LoadBalancers "+strings.Join(out.LoadBalancers, ", ")
	}
	if len(skipped) > 0 {
		if c.Reason == ReasonProgrammed {
			c.Reason = ReasonPortsSkipped
		}
		c.Message += "; ports not exposed: " + strings.Join(skipped, "; ")
	}
	c.Message = strings.TrimPrefix(c.Message, "; ")
	return c
}
