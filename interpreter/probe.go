package interpreter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// ProbeUID is the uid of the request Probe sends.
const ProbeUID = "lbfed-probe"

// Probe sends the interpreter at url (its /interpret URL, as registered with Karmada) one
// request as Karmada sends it — InterpretHealth of a LoadBalancer — and returns nil only when
// the answer is a ResourceInterpreterContext echoing the request's uid, successful, with a
// health verdict. `helm test` runs it (cmd/lbfed-probe): an interpreter that answers it over
// c's TLS trust answers Karmada. healthy is its verdict on that LoadBalancer (false: it has no
// status). The error says what was wrong.
func Probe(ctx context.Context, c *http.Client, url string) (healthy bool, err error) {
	body, err := json.Marshal(configv1alpha1.ResourceInterpreterContext{
		TypeMeta: metav1.TypeMeta{APIVersion: configv1alpha1.GroupVersion.String(), Kind: "ResourceInterpreterContext"},
		Request: &configv1alpha1.ResourceInterpreterRequest{
			UID:       types.UID(ProbeUID),
			Kind:      metav1.GroupVersionKind{Group: lbcfv1beta1.SchemeGroupVersion.Group, Version: lbcfv1beta1.SchemeGroupVersion.Version, Kind: lbcfv1beta1.KindLoadBalancer},
			Name:      "lbfed-probe",
			Namespace: "default",
			Operation: configv1alpha1.InterpreterOperationInterpretHealth,
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"LoadBalancer",` +
				`"metadata":{"name":"lbfed-probe","namespace":"default","generation":1},"spec":{"lbDriver":"lbfed-probe"}}`)},
		},
	})
	if err != nil {
		return false, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("request to %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := c.Do(req)
	if err != nil {
		return false, fmt.Errorf("POST %s: %w", url, err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(rsp.Body, 1<<20))
	if err != nil {
		return false, fmt.Errorf("read the answer of %s: %w", url, err)
	}
	if rsp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("POST %s: HTTP %d: %s", url, rsp.StatusCode, strings.TrimSpace(string(data)))
	}
	var answer configv1alpha1.ResourceInterpreterContext
	if err := json.Unmarshal(data, &answer); err != nil {
		return false, fmt.Errorf("the answer of %s is not a ResourceInterpreterContext: %w", url, err)
	}
	r := answer.Response
	switch {
	case r == nil:
		return false, fmt.Errorf("the answer of %s has no response", url)
	case r.UID != ProbeUID:
		return false, fmt.Errorf("the answer of %s is for request %q, not %q", url, r.UID, ProbeUID)
	case !r.Successful:
		msg := "no status"
		if r.Status != nil {
			msg = fmt.Sprintf("%d %s", r.Status.Code, r.Status.Message)
		}
		return false, fmt.Errorf("%s answered InterpretHealth unsuccessfully: %s", url, msg)
	case r.Healthy == nil:
		return false, fmt.Errorf("%s answered InterpretHealth without a health verdict", url)
	}
	return *r.Healthy, nil
}
