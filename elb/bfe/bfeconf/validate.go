package bfeconf

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Validate checks the whole set: every check BFE performs when it loads the files, and the
// cross-file invariants BFE does not check (a route to a cluster GSLB does not know gives 500s after
// a "successful" reload; a GSLB cluster without a cluster_table entry is applied half-way).
func (s *Set) Validate() error {
	return errors.Join(s.ValidateServerData(), s.ValidateGslbData(), CheckRoutable(s, s))
}

// ValidateServerData mirrors BFE's checks for host_rule, vip_rule, route_rule and cluster_conf,
// including the cross-checks /reload/server_data_conf performs between them.
func (s *Set) ValidateServerData() error {
	var errs []error
	add := func(file string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", file, err))
		}
	}
	products, err := checkHostRule(&s.HostRule)
	add(HostRulePath, err)
	add(VipRulePath, checkVipRule(&s.VipRule))
	add(ClusterConfPath, checkClusterConf(&s.ClusterConf))
	add(RouteRulePath, checkRouteRule(&s.RouteRule, products, s.ClusterConf.Config))
	return errors.Join(errs...)
}

// ValidateGslbData mirrors BFE's checks for gslb and cluster_table, and adds the ones BFE applies
// only at startup (every GSLB cluster and sub-cluster must have instances).
func (s *Set) ValidateGslbData() error {
	var errs []error
	if err := checkClusterTable(&s.ClusterTable); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", ClusterTablePath, err))
	}
	if err := checkGslb(&s.Gslb, s.ClusterTable.Config); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", GslbPath, err))
	}
	return errors.Join(errs...)
}

// CheckRoutable checks that every cluster the routes of server can reach is balanced by gslb: known
// to GSLB with an instance list. BFE accepts a route to an unbalanced cluster and then answers 500
// ("no balance for X"), so this is checked for every intermediate state of a reload sequence too.
func CheckRoutable(server, gslb *Set) error {
	var errs []error
	for _, c := range RoutedClusters(&server.RouteRule) {
		if _, ok := gslb.Gslb.Clusters[c]; !ok {
			errs = append(errs, fmt.Errorf("%s: cluster[%s] is routed but missing in %s", RouteRulePath, c, GslbPath))
			continue
		}
		if _, ok := gslb.ClusterTable.Config[c]; !ok {
			errs = append(errs, fmt.Errorf("%s: cluster[%s] is routed but missing in %s", RouteRulePath, c, ClusterTablePath))
		}
	}
	return errors.Join(errs...)
}

// RoutedClusters returns the sorted, distinct clusters named by route rules (ADVANCED_MODE excluded).
func RoutedClusters(rr *RouteRuleConf) []string {
	seen := map[string]struct{}{}
	for _, rules := range rr.BasicRule {
		for _, r := range rules {
			if r.ClusterName != AdvancedMode {
				seen[r.ClusterName] = struct{}{}
			}
		}
	}
	for _, rules := range rr.ProductRule {
		for _, r := range rules {
			seen[r.ClusterName] = struct{}{}
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func checkHostRule(h *HostRuleConf) (products map[string]struct{}, err error) {
	if h.Version == "" {
		return nil, errors.New("no Version")
	}
	if h.Hosts == nil {
		return nil, errors.New("no Hosts")
	}
	if h.HostTags == nil {
		return nil, errors.New("no HostTags")
	}
	var errs []error
	products = make(map[string]struct{}, len(h.HostTags))
	tags := map[string]struct{}{}
	for product, ts := range h.HostTags {
		products[product] = struct{}{}
		for _, t := range ts {
			tags[t] = struct{}{}
		}
	}
	seen := map[string]string{}
	for _, tag := range sortedKeys(h.Hosts) {
		if _, ok := tags[tag]; !ok {
			errs = append(errs, fmt.Errorf("hostTag[%s] in Hosts should also exist in HostTags", tag))
		}
		for _, host := range h.Hosts[tag] {
			key := strings.ToLower(host)
			if _, dup := seen[key]; dup {
				errs = append(errs, fmt.Errorf("host duplicate for %s", host))
			}
			seen[key] = tag
			if err := CheckHostname(host); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if h.DefaultProduct != nil {
		if _, ok := products[*h.DefaultProduct]; !ok {
			errs = append(errs, fmt.Errorf("defaultProduct[%s] must exist in HostTags", *h.DefaultProduct))
		}
	}
	return products, errors.Join(errs...)
}

func checkVipRule(v *VipRuleConf) error {
	if v.Version == "" {
		return errors.New("no Version")
	}
	var errs []error
	for _, product := range sortedKeys(v.Vips) {
		for _, ip := range v.Vips[product] {
			if _, err := netip.ParseAddr(ip); err != nil {
				errs = append(errs, fmt.Errorf("invalid vip %s for %s", ip, product))
			}
		}
	}
	return errors.Join(errs...)
}

var protocols = map[string]bool{"http": true, "tcp": true, "ws": true, "fcgi": true, "h2c": true, "https": true}
var checkSchemes = map[string]bool{"http": true, "https": true, "tls": true, "tcp": true}

func checkClusterConf(c *ClusterConf) error {
	if c.Version == "" {
		return errors.New("no Version")
	}
	if c.Config == nil {
		return errors.New("no Config")
	}
	var errs []error
	for _, name := range sortedKeys(c.Config) {
		cl := c.Config[name]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("cluster[%s]: %s", name, fmt.Sprintf(format, args...)))
		}
		if !protocols[cl.BackendConf.Protocol] {
			fail("protocol only support http/tcp/ws/fcgi/h2c/https, but is:%s", cl.BackendConf.Protocol)
		}
		if cl.BackendConf.TimeoutConnSrv <= 0 || cl.BackendConf.TimeoutResponseHeader <= 0 {
			fail("BackendConf timeouts must be > 0")
		}
		if !checkSchemes[cl.CheckConf.Schem] {
			fail("CheckConf.Schem must be http/https/tls/tcp, but is:%s", cl.CheckConf.Schem)
		}
		if (cl.CheckConf.Schem == "http" || cl.CheckConf.Schem == "https") && !strings.HasPrefix(cl.CheckConf.Uri, "/") {
			fail("CheckConf.Uri must start with /, but is:%q", cl.CheckConf.Uri)
		}
		if cl.CheckConf.FailNum <= 0 || cl.CheckConf.CheckInterval <= 0 {
			fail("CheckConf FailNum and CheckInterval must be > 0")
		}
		hc := cl.GslbBasic.HashConf
		if hc.HashStrategy < 0 || hc.HashStrategy > maxHashStrategyID {
			fail("GslbBasic:HashStrategy %d not supported", hc.HashStrategy)
		}
		if (hc.HashStrategy == HashClientID || hc.HashStrategy == HashClientIDOrIP) && hc.HashHeader == "" {
			fail("GslbBasic:no HashHeader")
		}
		if m := cl.GslbBasic.BalanceMode; m != "WRR" && m != "WLC" {
			fail("GslbBasic:BalanceMode %s not supported", m)
		}
		if cl.GslbBasic.RetryMax < 0 || cl.GslbBasic.CrossRetry < 0 {
			fail("GslbBasic retries must be >= 0")
		}
	}
	return errors.Join(errs...)
}

func checkRouteRule(r *RouteRuleConf, products map[string]struct{}, clusters map[string]Cluster) error {
	if r.Version == "" {
		return errors.New("no Version")
	}
	if r.BasicRule == nil && r.ProductRule == nil {
		return errors.New("no product rule")
	}
	var errs []error
	clusterExists := func(kind, name string) {
		if _, ok := clusters[name]; !ok {
			errs = append(errs, fmt.Errorf("cluster[%s] in %s route should exist in cluster_conf", name, kind))
		}
	}
	productExists := func(product string) {
		if _, ok := products[product]; !ok {
			errs = append(errs, fmt.Errorf("product[%s] in route should exist in host", product))
		}
	}
	for _, product := range sortedKeys(r.BasicRule) {
		productExists(product)
		type hostPath struct{ host, path string }
		seen := map[hostPath]string{}
		for i, rule := range r.BasicRule[product] {
			fail := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("product[%s] basic rule %d: %s", product, i, fmt.Sprintf(format, args...)))
			}
			if rule.ClusterName == "" {
				fail("no cluster name")
			} else if rule.ClusterName != AdvancedMode {
				clusterExists("basic", rule.ClusterName)
			}
			if len(rule.Hostname) == 0 && len(rule.Path) == 0 {
				fail("no hostname or path in basic route rule")
			}
			for _, h := range rule.Hostname {
				if err := CheckHostname(h); err != nil {
					fail("%v", err)
				}
			}
			for _, p := range rule.Path {
				if err := CheckPathPattern(p); err != nil {
					fail("%v", err)
				}
			}
			hosts, paths := rule.Hostname, rule.Path
			if len(hosts) == 0 {
				hosts = []string{""}
			}
			if len(paths) == 0 {
				paths = []string{""}
			}
			for _, h := range hosts {
				for _, p := range paths {
					k := hostPath{strings.ToLower(h), p}
					if prev, dup := seen[k]; dup {
						fail("path[%s] is duplicated in same host, existing cluster: %s", p, prev)
						continue
					}
					seen[k] = rule.ClusterName
				}
			}
		}
	}
	for _, product := range sortedKeys(r.ProductRule) {
		productExists(product)
		for i, rule := range r.ProductRule[product] {
			fail := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("product[%s] advanced rule %d: %s", product, i, fmt.Sprintf(format, args...)))
			}
			if rule.Cond == "" {
				fail("no cond")
			} else if err := CheckCond(rule.Cond); err != nil {
				fail("error build [%s] %v", rule.Cond, err)
			}
			if rule.ClusterName == "" {
				fail("no cluster name")
			} else {
				clusterExists("advanced", rule.ClusterName)
			}
		}
	}
	return errors.Join(errs...)
}

// CheckHostname accepts a DNS-ish hostname, "*", or a "*.suffix" wildcard.
func CheckHostname(h string) error {
	if h == "" {
		return errors.New("empty hostname")
	}
	if h == "*" {
		return nil
	}
	rest := h
	if strings.HasPrefix(h, "*.") {
		rest = h[2:]
	}
	if strings.Contains(rest, "*") {
		return fmt.Errorf("hostname %q: wildcard must be \"*\" or start with \"*.\"", h)
	}
	for _, label := range strings.Split(rest, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("hostname %q: invalid label", h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
				return fmt.Errorf("hostname %q: invalid character %q", h, c)
			}
		}
	}
	return nil
}

// CheckPathPattern mirrors BFE's basic-rule path syntax: at most one "*", only as the last character.
func CheckPathPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q must start with /", p)
	}
	switch n := strings.Count(p, "*"); {
	case n > 1:
		return fmt.Errorf("path %q: only one * is allowed", p)
	case n == 1 && !strings.HasSuffix(p, "*"):
		return fmt.Errorf("path %q: * must appear as last character of path", p)
	}
	return nil
}

func checkClusterTable(t *ClusterTableConf) error {
	if t.Version == "" {
		return errors.New("no Version")
	}
	if t.Config == nil {
		return errors.New("no Config")
	}
	var errs []error
	for _, cluster := range sortedKeys(t.Config) {
		subs := t.Config[cluster]
		for _, sub := range sortedKeys(subs) {
			avail := false
			for i, in := range subs[sub] {
				fail := func(msg string) {
					errs = append(errs, fmt.Errorf("cluster_table %s %s %d %s", cluster, sub, i, msg))
				}
				if in.Name == "" {
					fail("no Name")
				}
				if _, err := netip.ParseAddr(in.Addr); err != nil {
					fail("no Addr or invalid Addr " + in.Addr)
				}
				if in.Port <= 0 || in.Port > 65535 {
					fail("no Port")
				}
				if in.Weight < 0 {
					fail("negative Weight")
				}
				if in.Weight > 0 {
					avail = true
				}
			}
			if !avail {
				errs = append(errs, fmt.Errorf("cluster_table %s %s no avail backend", cluster, sub))
			}
		}
	}
	return errors.Join(errs...)
}

func checkGslb(g *GslbConf, table map[string]map[string][]Instance) error {
	if g.Clusters == nil {
		return errors.New("no Clusters")
	}
	if g.Hostname == "" {
		return errors.New("no Hostname")
	}
	if g.Ts == "" {
		return errors.New("no Ts")
	}
	var errs []error
	for _, cluster := range sortedKeys(g.Clusters) {
		total := 0
		for _, sub := range sortedKeys(g.Clusters[cluster]) {
			w := g.Clusters[cluster][sub]
			if w < 0 {
				errs = append(errs, fmt.Errorf("cluster[%s] sub-cluster[%s]: negative weight %d", cluster, sub, w))
			}
			total += w
			if sub == Blackhole {
				continue
			}
			// Not checked by BFE at reload time: the sub-cluster silently gets 0 backends.
			if _, ok := table[cluster][sub]; !ok {
				errs = append(errs, fmt.Errorf("cluster[%s] sub-cluster[%s] has no instance list in %s", cluster, sub, ClusterTablePath))
			}
		}
		if total <= 0 {
			errs = append(errs, fmt.Errorf("cluster[%s]: total weight <= 0", cluster))
		}
		// Not checked by BFE at reload time: it reports an error but applies the data anyway.
		if _, ok := table[cluster]; !ok {
			errs = append(errs, fmt.Errorf("cluster[%s] is in gslb but missing in %s", cluster, ClusterTablePath))
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
