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
// a "successful" reload; a GSLB cluster without a cluster_table entry is applied half-way). The
// refusals BFE 1.8.5 does not make are PolicyErrors (see SplitPolicy).
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
			errs = append(errs, policyf("%s: cluster[%s] is routed but missing in %s", RouteRulePath, c, GslbPath))
			continue
		}
		if _, ok := gslb.ClusterTable.Config[c]; !ok {
			errs = append(errs, policyf("%s: cluster[%s] is routed but missing in %s", RouteRulePath, c, ClusterTablePath))
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
	var errs []error
	if h.Version == "" {
		errs = append(errs, emptyVersion)
	}
	if h.Hosts == nil {
		return nil, errors.New("no Hosts")
	}
	if h.HostTags == nil {
		return nil, errors.New("no HostTags")
	}
	products = make(map[string]struct{}, len(h.HostTags))
	tags := map[string]struct{}{}
	for product, ts := range h.HostTags {
		products[product] = struct{}{}
		for _, t := range ts {
			tags[t] = struct{}{}
		}
	}
	seen, seenFolded := map[string]bool{}, map[string]bool{}
	for _, tag := range sortedKeys(h.Hosts) {
		if _, ok := tags[tag]; !ok {
			errs = append(errs, fmt.Errorf("hostTag[%s] in Hosts should also exist in HostTags", tag))
		}
		for _, host := range h.Hosts[tag] {
			// BFE compares host_rule names case-sensitively; lookups fold case, so names that
			// differ only in case are ambiguous.
			switch key := strings.ToLower(host); {
			case seen[host]:
				errs = append(errs, fmt.Errorf("host duplicate for %s", host))
			case seenFolded[key]:
				errs = append(errs, policyf("host duplicate for %s (differs only in case)", host))
			}
			seen[host], seenFolded[strings.ToLower(host)] = true, true
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
	var errs []error
	if v.Version == "" {
		errs = append(errs, emptyVersion)
	}
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
	var errs []error
	if c.Version == "" {
		errs = append(errs, emptyVersion)
	}
	if c.Config == nil {
		return errors.Join(append(errs, errors.New("no Config"))...)
	}
	for _, name := range sortedKeys(c.Config) {
		cl := c.Config[name]
		fail := func(err error) {
			errs = append(errs, fmt.Errorf("cluster[%s]: %w", name, err))
		}
		// BFE lower-cases the protocol and upper-cases the balance mode, and defaults absent (not
		// empty) settings; this driver writes every setting explicitly and canonically.
		switch p := cl.BackendConf.Protocol; {
		case !protocols[strings.ToLower(p)]:
			fail(fmt.Errorf("protocol only support http/tcp/ws/fcgi/h2c/https, but is:%s", p))
		case p != strings.ToLower(p):
			fail(policyf("BackendConf.Protocol %s must be lower case", p))
		}
		if cl.BackendConf.TimeoutConnSrv <= 0 || cl.BackendConf.TimeoutResponseHeader <= 0 {
			fail(policyf("BackendConf timeouts must be > 0"))
		}
		switch sc := cl.CheckConf.Schem; {
		case !checkSchemes[sc]:
			fail(fmt.Errorf("CheckConf.Schem must be http/https/tls/tcp, but is:%s", sc))
		case (sc == "http" || sc == "https") && !strings.HasPrefix(cl.CheckConf.Uri, "/"):
			fail(fmt.Errorf("CheckConf.Uri must start with /, but is:%q", cl.CheckConf.Uri))
		}
		if cl.CheckConf.FailNum <= 0 || cl.CheckConf.CheckInterval <= 0 {
			fail(policyf("CheckConf FailNum and CheckInterval must be > 0"))
		}
		hc := cl.GslbBasic.HashConf
		if hc.HashStrategy < 0 || hc.HashStrategy > maxHashStrategyID {
			fail(fmt.Errorf("GslbBasic:HashStrategy %d not supported", hc.HashStrategy))
		}
		if (hc.HashStrategy == HashClientID || hc.HashStrategy == HashClientIDOrIP) && hc.HashHeader == "" {
			fail(errors.New("GslbBasic:no HashHeader"))
		}
		switch m := cl.GslbBasic.BalanceMode; {
		case strings.ToUpper(m) != "WRR" && strings.ToUpper(m) != "WLC":
			fail(fmt.Errorf("GslbBasic:BalanceMode %s not supported", m))
		case m != strings.ToUpper(m):
			fail(policyf("GslbBasic:BalanceMode %s must be upper case", m))
		}
		if cl.GslbBasic.RetryMax < 0 || cl.GslbBasic.CrossRetry < 0 {
			fail(policyf("GslbBasic retries must be >= 0"))
		}
	}
	return errors.Join(errs...)
}

// emptyVersion: BFE refuses only a missing Version (its loaders check for null), but an empty one
// makes /monitor/*_version useless for confirming a reload.
var emptyVersion = policyf("empty Version")

func checkRouteRule(r *RouteRuleConf, products map[string]struct{}, clusters map[string]Cluster) error {
	var errs []error
	if r.Version == "" {
		errs = append(errs, emptyVersion)
	}
	if r.BasicRule == nil && r.ProductRule == nil {
		return errors.Join(append(errs, errors.New("no product rule"))...)
	}
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
		seen := map[basicKey]string{}
		for i, rule := range r.BasicRule[product] {
			fail := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("product[%s] basic rule %d: "+format, append([]any{product, i}, args...)...))
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
					fail("%w", err)
				}
			}
			for _, p := range rule.Path {
				if err := CheckPathPattern(p); err != nil {
					fail("%w", err)
				}
			}
			// BFE's basic-rule tree: no host means "*", no path means "*"; hosts compare without
			// case, and "/p*" and "/p/*" are the same prefix.
			hosts, paths := rule.Hostname, rule.Path
			if len(hosts) == 0 {
				hosts = []string{"*"}
			}
			if len(paths) == 0 {
				paths = []string{"*"}
			}
			for _, h := range hosts {
				for _, p := range paths {
					k := basicRuleKey(h, p)
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
				errs = append(errs, fmt.Errorf("product[%s] advanced rule %d: "+format, append([]any{product, i}, args...)...))
			}
			if rule.Cond == "" {
				fail("no cond")
			} else if err := CheckCond(rule.Cond); err != nil {
				fail("error build [%s] %w", rule.Cond, err)
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
	// BFE checks only the wildcard; the rest is this driver's policy.
	for _, label := range strings.Split(rest, ".") {
		if label == "" || len(label) > 63 {
			return policyf("hostname %q: invalid label", h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
				return policyf("hostname %q: invalid character %q", h, c)
			}
		}
	}
	return nil
}

// CheckPathPattern mirrors BFE's basic-rule path syntax: at most one "*", only as the last character.
func CheckPathPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return policyf("path %q must start with /", p)
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
	var errs []error
	if t.Version == "" {
		errs = append(errs, emptyVersion)
	}
	if t.Config == nil {
		return errors.Join(append(errs, errors.New("no Config"))...)
	}
	for _, cluster := range sortedKeys(t.Config) {
		subs := t.Config[cluster]
		for _, sub := range sortedKeys(subs) {
			avail := false
			for i, in := range subs[sub] {
				fail := func(err error) {
					errs = append(errs, fmt.Errorf("cluster_table %s %s %d %w", cluster, sub, i, err))
				}
				// BFE refuses only absent Name, Addr, Port or Weight (see fakebfe); the values are
				// this driver's policy.
				if in.Name == "" {
					fail(policyf("no Name"))
				}
				if err := CheckInstanceAddr(in.Addr); err != nil {
					fail(err)
				}
				if in.Port <= 0 || in.Port > 65535 {
					fail(policyf("no Port or invalid Port %d", in.Port))
				}
				if in.Weight < 0 {
					fail(policyf("negative Weight"))
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

// InstanceAddr renders an instance address for cluster_table: BFE dials fmt.Sprintf("%s:%d",
// Addr, Port), so an IPv6 address must carry its brackets.
func InstanceAddr(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// CheckInstanceAddr accepts an IPv4 address or a bracketed IPv6 address. BFE loads anything, but
// dials "Addr:Port": "::1" fails every request ("too many colons in address") and a name such as
// localhost depends on the BFE host's resolver.
func CheckInstanceAddr(addr string) error {
	if strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]") {
		if a, err := netip.ParseAddr(addr[1 : len(addr)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return nil
		}
		return policyf("invalid Addr %s", addr)
	}
	a, err := netip.ParseAddr(addr)
	switch {
	case err != nil:
		return policyf("no Addr or invalid Addr %s: want an IP address", addr)
	case a.Is6():
		return policyf("invalid Addr %s: an IPv6 address must be written [%s], BFE dials Addr:Port", addr, addr)
	}
	return nil
}

func checkGslb(g *GslbConf, table map[string]map[string][]Instance) error {
	if g.Clusters == nil {
		return errors.New("no Clusters")
	}
	var errs []error
	if g.Hostname == "" {
		errs = append(errs, policyf("empty Hostname"))
	}
	if g.Ts == "" {
		errs = append(errs, policyf("empty Ts"))
	}
	for _, cluster := range sortedKeys(g.Clusters) {
		total := 0
		for _, sub := range sortedKeys(g.Clusters[cluster]) {
			w := g.Clusters[cluster][sub]
			if w < 0 {
				errs = append(errs, policyf("cluster[%s] sub-cluster[%s]: negative weight %d", cluster, sub, w))
			} else {
				total += w
			}
			if sub == Blackhole {
				continue
			}
			// Not checked by BFE at reload time: the sub-cluster silently gets 0 backends.
			if _, ok := table[cluster][sub]; !ok {
				errs = append(errs, policyf("cluster[%s] sub-cluster[%s] has no instance list in %s", cluster, sub, ClusterTablePath))
			}
		}
		if total <= 0 {
			errs = append(errs, fmt.Errorf("cluster[%s]: total weight <= 0", cluster))
		}
		// BFE reports this at reload time but applies the data anyway.
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

// basicKey is a node of BFE's basic-rule tree: exact or wildcard host (case-folded, "*" → ""), and
// exact or prefix path ("/p*" and "/p/*" → "/p/").
type basicKey struct {
	wildHost, wildPath bool
	host, path         string
}

func basicRuleKey(host, path string) basicKey {
	k := basicKey{host: strings.ToUpper(host), path: path}
	if strings.HasPrefix(host, "*") {
		k.wildHost, k.host = true, strings.ToUpper(host[1:])
	}
	if strings.HasSuffix(path, "*") {
		k.wildPath, k.path = true, strings.TrimSuffix(path, "*")
		if k.path != "" && !strings.HasSuffix(k.path, "/") {
			k.path += "/"
		}
	}
	return k
}
