//go:build kind

// Package kind_test is the end-to-end suite on Karmada on kind (`make test-kind`): real kubelets,
// containers and kube-proxy, lbfed installed with Helm as its chart README says (`make up-kind`,
// hack/kind/lbfed-up.sh), the demo of both members behind one VIP of the simulated Alteon pair.
// It checks what only a real install shows — traffic from both members through the VIP, a helm
// upgrade rolling lbfed-controller without a failed request, `helm test`, an uninstall that leaves
// nothing behind (install_test.go) — and the traffic guarantees on real kubelets: rollouts,
// member cuts, leader failover, restarts (guarantees_test.go). The uninstall is last: the suite
// consumes the installation.
package kind_test

import (
	"sort"
	"testing"
)

func TestKind(t *testing.T) {
	e := newEnv(t)
	figures := map[string]string{}
	defer func() {
		keys := make([]string, 0, len(figures))
		for k := range figures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("FIGURE %s: %s", k, figures[k])
		}
	}()
	t.Run("the VIP answers from pods of both members", func(t *testing.T) { e.withT(t).vipAnswers() })
	t.Run("guarantees on real kubelets", func(t *testing.T) { e.withT(t).guarantees(figures) })
	t.Run("helm upgrade rolls lbfed-controller with no failed request", func(t *testing.T) { e.withT(t).upgrade(figures) })
	t.Run("helm test passes for both releases", func(t *testing.T) { e.withT(t).helmTest() })
	t.Run("helm uninstall leaves nothing behind", func(t *testing.T) { e.withT(t).uninstall() })
}

// withT is the env for a subtest.
func (e *env) withT(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}
