package deploy

import (
	"fmt"
	"strings"
	"text/template"

	"github.com/lbfed/lbfed/lbcf/driver"
)

// DriverYAML is a YAML document (led by "---") declaring LoadBalancerDriver namespace/name: a
// Webhook driver at url listing every webhook a driver must list (healthz, optional, is left
// out). The webhooks that change the load balancer wait timeout ("" for 1m); the validations and
// generateBackendAddr 10s.
func DriverYAML(namespace, name, url, timeout string) string {
	if timeout == "" {
		timeout = "1m"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "---\napiVersion: lbcf.tkestack.io/v1beta1\nkind: LoadBalancerDriver\nmetadata: {name: %s, namespace: %s}\n", name, namespace)
	fmt.Fprintf(&b, "spec:\n  driverType: Webhook\n  url: %s\n  webhooks:\n", url)
	for _, w := range driver.KnownWebhooks {
		t := timeout
		switch w {
		case driver.Healthz:
			continue
		case driver.ValidateLoadBalancer, driver.ValidateBackend, driver.GenerateBackendAddr:
			t = "10s"
		}
		fmt.Fprintf(&b, "  - {name: %s, timeout: %s}\n", w, t)
	}
	return b.String()
}

// TemplateFuncs lets manifest templates declare drivers: {{driver "ns" "name" .DriverURL ""}}.
var TemplateFuncs = template.FuncMap{"driver": DriverYAML}
