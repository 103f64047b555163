package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// Paths of the admission webhooks. The original's BackendGroup mutating path has a typo
// ("broup"); both spellings are served.
const (
	PathValidateDriver       = "/validate-load-balancer-driver"
	PathValidateLoadBalancer = "/validate-load-balancer"
	PathValidateBackendGroup = "/validate-backend-group"
	PathMutateDriver         = "/mutate-load-balancer-driver"
	PathMutateLoadBalancer   = "/mutate-load-balancer"
	PathMutateBackendGroup   = "/mutate-backend-group"
	PathMutateBackendBroup   = "/mutate-backend-broup"
)

// DryRunDenial is the refusal of every valid request while the controller runs with --dry-run.
const DryRunDenial = "validate succeeded, but this operation is rejected because lbcf-controller is in dry-run mode"

// Webhooks serves LBCF admission.
type Webhooks struct {
	// Client reads drivers, LoadBalancers and records (a cached client is fine).
	Client client.Reader
	// Invoker calls drivers' validate webhooks.
	Invoker driver.Invoker
	// Decoder decodes request objects (admission.NewDecoder(scheme) with the LBCF types).
	Decoder admission.Decoder
	// DryRun denies every request that passed validation.
	DryRun bool
	// Member: the cluster is a federation member, where LoadBalancers and drivers live in the
	// Karmada control plane, which already validated the templates with the drivers: objects are
	// checked on their own, never with a driver call. The do-not-delete label of a copy Karmada
	// manages is enforced on its template instead (Karmada must be able to withdraw the copy).
	Member bool
	// Federated: the API server is Karmada's and the objects are templates, which Karmada's
	// controllers write too (labels, annotations, finalizers). An update that leaves the spec
	// alone passes without validation or driver call, so that no Karmada write is ever blocked
	// by a driver (or by a template created before the webhooks were installed).
	Federated bool
}

// LabelManagedByKarmada marks the member copies Karmada propagates (Karmada's
// util.ManagedByKarmadaLabel).
const LabelManagedByKarmada = "karmada.io/managed"

// Registrar is what Register needs of a webhook server (controller-runtime's webhook.Server).
type Registrar interface {
	Register(path string, hook http.Handler)
}

// Register adds every webhook to a controller-runtime webhook server.
func (w *Webhooks) Register(s Registrar) {
	s.Register(PathValidateDriver, &webhook.Admission{Handler: admission.HandlerFunc(w.validateDriver)})
	s.Register(PathValidateLoadBalancer, &webhook.Admission{Handler: admission.HandlerFunc(w.validateLoadBalancer)})
	s.Register(PathValidateBackendGroup, &webhook.Admission{Handler: admission.HandlerFunc(w.validateBackendGroup)})
	s.Register(PathMutateDriver, &webhook.Admission{Handler: admission.HandlerFunc(w.mutateDriver)})
	s.Register(PathMutateLoadBalancer, &webhook.Admission{Handler: admission.HandlerFunc(w.mutateLoadBalancer)})
	mutateBG := &webhook.Admission{Handler: admission.HandlerFunc(w.mutateBackendGroup)}
	s.Register(PathMutateBackendGroup, mutateBG)
	s.Register(PathMutateBackendBroup, mutateBG)
}

// allow answers a request that passed validation (denied in dry-run mode).
func (w *Webhooks) allow() admission.Response {
	if w.DryRun {
		return admission.Denied(DryRunDenial)
	}
	return admission.Allowed("")
}

func deny(errs field.ErrorList) admission.Response {
	return admission.Denied(errs.ToAggregate().Error())
}

func decode[T runtime.Object](w *Webhooks, req admission.Request, obj, old T) (T, T, *admission.Response) {
	var zero T
	if req.Operation == admissionv1.Delete {
		if err := w.Decoder.DecodeRaw(req.OldObject, obj); err != nil {
			r := admission.Errored(http.StatusBadRequest, err)
			return zero, zero, &r
		}
		return obj, zero, nil
	}
	if err := w.Decoder.Decode(req, obj); err != nil {
		r := admission.Errored(http.StatusBadRequest, err)
		return zero, zero, &r
	}
	if req.Operation == admissionv1.Update {
		if err := w.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			r := admission.Errored(http.StatusBadRequest, err)
			return zero, zero, &r
		}
		return obj, old, nil
	}
	return obj, zero, nil
}

// unchangedSpec: in federated mode, an update that leaves the spec alone is let through.
func (w *Webhooks) unchangedSpec(req admission.Request, spec, oldSpec any) bool {
	return w.Federated && req.Operation == admissionv1.Update && equality.Semantic.DeepEqual(spec, oldSpec)
}

// doNotDelete reports whether the do-not-delete label blocks deleting obj here.
func (w *Webhooks) doNotDelete(labels map[string]string) bool {
	if w.Member && labels[LabelManagedByKarmada] == "true" {
		return false
	}
	return hasDoNotDelete(labels)
}

func (w *Webhooks) validateDriver(ctx context.Context, req admission.Request) admission.Response {
	d, old, bad := decode(w, req, &lbcfv1beta1.LoadBalancerDriver{}, &lbcfv1beta1.LoadBalancerDriver{})
	if bad != nil {
		return *bad
	}
	if req.Operation == admissionv1.Delete {
		return w.validateDriverDelete(ctx, d)
	}
	if old != nil && w.unchangedSpec(req, d.Spec, old.Spec) {
		return admission.Allowed("")
	}
	if errs := ValidateDriver(d, old); len(errs) > 0 {
		return deny(errs)
	}
	return w.allow()
}

// validateDriverDelete: a driver must be draining, and no LoadBalancer or record may use it.
func (w *Webhooks) validateDriverDelete(ctx context.Context, d *lbcfv1beta1.LoadBalancerDriver) admission.Response {
	if !d.IsDraining() {
		return admission.Denied(fmt.Sprintf("label %s=true is required before deleting a driver", lbcfv1beta1.DriverDrainingLabel))
	}
	var opts []client.ListOption
	if d.Namespace != lbcfv1beta1.SystemNamespace {
		opts = append(opts, client.InNamespace(d.Namespace))
	}
	lbs := &lbcfv1beta1.LoadBalancerList{}
	if err := w.Client.List(ctx, lbs, opts...); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	for _, lb := range lbs.Items {
		if lb.Spec.LBDriver == d.Name && sharedNamespace(lb.Namespace, lb.Spec.LBDriver) == d.Namespace {
			return admission.Denied(fmt.Sprintf("driver is used by LoadBalancer %s/%s", lb.Namespace, lb.Name))
		}
	}
	brs := &lbcfv1beta1.BackendRecordList{}
	if err := w.Client.List(ctx, brs, append(opts, client.MatchingLabels{lbcfv1beta1.LabelDriverName: d.Name})...); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	for _, br := range brs.Items {
		if sharedNamespace(br.Namespace, br.Spec.LBDriver) == d.Namespace {
			return admission.Denied(fmt.Sprintf("driver is used by BackendRecord %s/%s", br.Namespace, br.Name))
		}
	}
	return w.allow()
}

func sharedNamespace(ns, name string) string {
	if strings.HasPrefix(name, lbcfv1beta1.SystemDriverPrefix) {
		return lbcfv1beta1.SystemNamespace
	}
	return ns
}

// usableDriver returns the driver named from namespace ns, or a denial when it is missing,
// draining or being deleted.
func (w *Webhooks) usableDriver(ctx context.Context, ns, name string) (*lbcfv1beta1.LoadBalancerDriver, *admission.Response) {
	d := &lbcfv1beta1.LoadBalancerDriver{}
	key := client.ObjectKey{Namespace: sharedNamespace(ns, name), Name: name}
	if err := w.Client.Get(ctx, key, d); err != nil {
		r := admission.Denied(fmt.Sprintf("driver %s not found", key))
		if !apierrors.IsNotFound(err) {
			r = admission.Errored(http.StatusInternalServerError, err)
		}
		return nil, &r
	}
	if d.IsDraining() || d.DeletionTimestamp != nil {
		r := admission.Denied(fmt.Sprintf("driver %s is draining or being deleted", key))
		return nil, &r
	}
	return d, nil
}

func (w *Webhooks) validateLoadBalancer(ctx context.Context, req admission.Request) admission.Response {
	lb, old, bad := decode(w, req, &lbcfv1beta1.LoadBalancer{}, &lbcfv1beta1.LoadBalancer{})
	if bad != nil {
		return *bad
	}
	switch req.Operation {
	case admissionv1.Delete:
		if w.doNotDelete(lb.Labels) {
			return admission.Denied(fmt.Sprintf("LoadBalancer has label %s", lbcfv1beta1.LabelDoNotDelete))
		}
		return w.allow()
	case admissionv1.Update:
		if lb.DeletionTimestamp != nil || w.unchangedSpec(req, lb.Spec, old.Spec) {
			return admission.Allowed("") // finalizer removal must never be blocked
		}
	}
	if errs := ValidateLoadBalancer(lb, old); len(errs) > 0 {
		return deny(errs)
	}
	if w.Member {
		return w.allow()
	}
	d, denied := w.usableDriver(ctx, lb.Namespace, lb.Spec.LBDriver)
	if denied != nil {
		if req.Operation == admissionv1.Update {
			return w.allow() // status/finalizer updates of existing LoadBalancers go through
		}
		return *denied
	}
	vreq := &driver.ValidateLoadBalancerRequest{DryRun: w.DryRun, LBSpec: lb.Spec.LBSpec, Operation: driver.OperationCreate, Attributes: lb.Spec.Attributes}
	if old != nil {
		vreq.Operation, vreq.OldAttributes = driver.OperationUpdate, old.Spec.Attributes
	}
	rsp, err := w.Invoker.ValidateLoadBalancer(ctx, driver.EndpointFor(d), vreq)
	if err != nil {
		return admission.Denied(fmt.Sprintf("validateLoadBalancer: %v", err))
	}
	if !rsp.Succ {
		return admission.Denied(fmt.Sprintf("driver %s refused: %s", d.Name, rsp.Msg))
	}
	return w.allow()
}

func (w *Webhooks) validateBackendGroup(ctx context.Context, req admission.Request) admission.Response {
	bg, old, bad := decode(w, req, &lbcfv1beta1.BackendGroup{}, &lbcfv1beta1.BackendGroup{})
	if bad != nil {
		return *bad
	}
	if req.Operation == admissionv1.Delete {
		if w.doNotDelete(bg.Labels) {
			return admission.Denied(fmt.Sprintf("BackendGroup has label %s", lbcfv1beta1.LabelDoNotDelete))
		}
		return w.allow()
	}
	if bg.DeletionTimestamp != nil || old != nil && w.unchangedSpec(req, bg.Spec, old.Spec) {
		return admission.Allowed("")
	}
	if errs := ValidateBackendGroup(bg, old); len(errs) > 0 {
		return deny(errs)
	}
	if w.Member {
		return w.allow()
	}
	optional := bg.Annotations[lbcfv1beta1.AnnotationValidationPolicy] == lbcfv1beta1.ValidationPolicyOptional
	for _, name := range bg.Spec.GetLoadBalancers() {
		lb := &lbcfv1beta1.LoadBalancer{}
		key := client.ObjectKey{Namespace: sharedNamespace(bg.Namespace, name), Name: name}
		if err := w.Client.Get(ctx, key, lb); err != nil {
			if apierrors.IsNotFound(err) {
				if optional {
					continue
				}
				return admission.Denied(fmt.Sprintf("LoadBalancer %s not found (annotate the group %s: %s to allow this)", key, lbcfv1beta1.AnnotationValidationPolicy, lbcfv1beta1.ValidationPolicyOptional))
			}
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if lb.DeletionTimestamp != nil {
			return admission.Denied(fmt.Sprintf("LoadBalancer %s is being deleted", key))
		}
		if !lb.IsAllowedFor(bg.Namespace) {
			return admission.Denied(fmt.Sprintf("LoadBalancer %s may not be used from namespace %s (see its spec.scope)", key, bg.Namespace))
		}
		d, denied := w.usableDriver(ctx, lb.Namespace, lb.Spec.LBDriver)
		if denied != nil {
			return *denied
		}
		vreq := &driver.ValidateBackendRequest{DryRun: w.DryRun, BackendType: bg.Spec.BackendType(), LBInfo: lb.Status.LBInfo,
			Operation: driver.OperationCreate, Parameters: bg.Spec.Parameters}
		if old != nil {
			vreq.Operation, vreq.OldParameters = driver.OperationUpdate, old.Spec.Parameters
		}
		rsp, err := w.Invoker.ValidateBackend(ctx, driver.EndpointFor(d), vreq)
		if err != nil {
			return admission.Denied(fmt.Sprintf("validateBackend for LoadBalancer %s: %v", key, err))
		}
		if !rsp.Succ {
			return admission.Denied(fmt.Sprintf("driver %s refused for LoadBalancer %s: %s", d.Name, key, rsp.Msg))
		}
	}
	return w.allow()
}

// patch answers a mutating request with the JSON patch from the raw object to the mutated one.
func patch(req admission.Request, obj any) admission.Response {
	out, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

func (w *Webhooks) mutateDriver(_ context.Context, req admission.Request) admission.Response {
	d := &lbcfv1beta1.LoadBalancerDriver{}
	if err := w.Decoder.Decode(req, d); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	MutateDriver(d)
	return patch(req, d)
}

func (w *Webhooks) mutateLoadBalancer(_ context.Context, req admission.Request) admission.Response {
	lb := &lbcfv1beta1.LoadBalancer{}
	if err := w.Decoder.Decode(req, lb); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	MutateLoadBalancer(lb)
	return patch(req, lb)
}

func (w *Webhooks) mutateBackendGroup(_ context.Context, req admission.Request) admission.Response {
	bg := &lbcfv1beta1.BackendGroup{}
	if err := w.Decoder.Decode(req, bg); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	MutateBackendGroup(bg)
	return patch(req, bg)
}
