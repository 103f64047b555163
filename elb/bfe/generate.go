package bfe

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// GenerateOptions are the installation-wide settings of generated configuration.
type GenerateOptions struct {
	// Product is the BFE product (tenant) holding every host and route. Default "lbfed".
	Product string
	// Source is gslb.data's Hostname, shown by /monitor/bal_table_version as GslbConfSrc. Default "lbfed".
	Source string
	// Cluster is the template of every cluster's settings; zero means DefaultClusterSettings.
	Cluster *bfeconf.Cluster
}

func (o GenerateOptions) withDefaults() GenerateOptions {
	if o.Product == "" {
		o.Product = "lbfed"
	}
	if o.Source == "" {
		o.Source = "lbfed"
	}
	if o.Cluster == nil {
		c := DefaultClusterSettings()
		o.Cluster = &c
	}
	return o
}

// DefaultClusterSettings are the per-cluster settings written for every LoadBalancer. The hash
// settings matter: BFE's default (client IP) would send every request of one client to the same
// sub-cluster, so sub-cluster weights are applied per request with a hash header no client sends.
func DefaultClusterSettings() bfeconf.Cluster {
	return bfeconf.Cluster{
		BackendConf: bfeconf.BackendConf{Protocol: "http", TimeoutConnSrv: 2000, TimeoutResponseHeader: 60000,
			MaxIdleConnsPerHost: 2, RetryLevel: 0},
		// A TCP check needs nothing from the application; BFE runs it only for backends marked down.
		CheckConf: bfeconf.CheckConf{Schem: "tcp", FailNum: 5, CheckInterval: 1000},
		// CrossRetry 1: when a member cluster's backends fail, retry once in another sub-cluster.
		GslbBasic: bfeconf.GslbBasic{CrossRetry: 1, RetryMax: 2, BalanceMode: "WRR",
			HashConf: bfeconf.HashConf{HashStrategy: bfeconf.HashClientID, HashHeader: bfeconf.NonExistentHashHeader}},
		ClusterBasic: bfeconf.ClusterBasic{TimeoutReadClient: 30000, TimeoutWriteClient: 60000,
			TimeoutReadClientAgain: 30000, ReqWriteBufferSize: 512, ResFlushInterval: -1},
	}
}

// Versions are the version strings stamped into each reload group's files.
type Versions struct {
	ServerData string `json:"serverData"`
	GslbData   string `json:"gslbData"`
}

// LBReport is what generation decided for one LoadBalancer; drivers report it to users.
type LBReport struct {
	// Installed is true when the LoadBalancer's route, cluster and backends are in the configuration.
	Installed bool
	// SubClusters maps member cluster → GSLB weight for the installed sub-clusters.
	SubClusters map[string]int
	// Reason explains why the LoadBalancer is not installed, or what was left out.
	Reason string
}

// Generation is the output of Generate.
type Generation struct {
	Set     *bfeconf.Set
	Reports map[string]LBReport
}

// Generate renders the model into BFE configuration. It is a pure function of its inputs, and the
// output is deterministic (sorted slices, sorted map keys on rendering).
//
// A LoadBalancer is installed only when it has at least one sub-cluster with positive weight and
// positive-weight instances; otherwise its route is left out, so its traffic falls through to the
// next matching route instead of reaching a cluster with no backends.
func Generate(m *Model, v Versions, opts GenerateOptions) *Generation {
	opts = opts.withDefaults()
	product := opts.Product
	set := &bfeconf.Set{
		HostRule: bfeconf.HostRuleConf{Version: v.ServerData, DefaultProduct: &product,
			Hosts: map[string][]string{product: {}}, HostTags: map[string][]string{product: {product}}},
		VipRule:      bfeconf.VipRuleConf{Version: v.ServerData, Vips: map[string][]string{}},
		RouteRule:    bfeconf.RouteRuleConf{Version: v.ServerData, BasicRule: map[string][]bfeconf.BasicRule{product: {}}, ProductRule: map[string][]bfeconf.ProductRule{product: {}}},
		ClusterConf:  bfeconf.ClusterConf{Version: v.ServerData, Config: map[string]bfeconf.Cluster{}},
		NameConf:     bfeconf.NameConf{Version: "1", Config: map[string]string{}},
		ClusterTable: bfeconf.ClusterTableConf{Version: v.GslbData, Config: map[string]map[string][]bfeconf.Instance{}},
		Gslb:         bfeconf.GslbConf{Clusters: map[string]map[string]int{}, Hostname: opts.Source, Ts: v.GslbData},
	}
	gen := &Generation{Set: set, Reports: make(map[string]LBReport, len(m.LoadBalancers))}

	var installed []*LBState
	hosts := map[string]struct{}{}
	for _, lb := range m.sortedLBs() {
		subs, weights, report := balance(lb)
		gen.Reports[lb.Name] = report
		if !report.Installed {
			continue
		}
		installed = append(installed, lb)
		set.ClusterConf.Config[lb.Name] = *opts.Cluster
		set.ClusterTable.Config[lb.Name] = subs
		set.Gslb.Clusters[lb.Name] = weights
		if !strings.Contains(lb.Host, "*") {
			hosts[strings.ToLower(lb.Host)] = struct{}{}
		}
	}
	for h := range hosts {
		set.HostRule.Hosts[product] = append(set.HostRule.Hosts[product], h)
	}
	sort.Strings(set.HostRule.Hosts[product])
	set.RouteRule.BasicRule[product], set.RouteRule.ProductRule[product] = routes(installed)
	return gen
}

// subClusterName names a member cluster's sub-cluster inside a BFE cluster; a subset's
// sub-clusters are "<cluster>.<subset>.<member>" (Service and Karmada cluster names have no dots).
func subClusterName(cluster, subset, member string) string {
	if subset != "" {
		return cluster + "." + subset + "." + member
	}
	return cluster + "." + member
}

// balance builds the cluster_table and gslb entries of one LoadBalancer.
//
// Sub-cluster weights follow ingress-bfe's balance.weight semantics: non-negative integers, 0 means
// no traffic, the sum must be positive. A member's weight is the clusterWeight parameter of its
// backends (the smallest when they disagree, e.g. during a rollout); without it, the sum of its
// instance weights, which makes a federated pool behave like one flat pool.
//
// Backends with a subset (one Service of a balance.weight split) get one sub-cluster per subset
// and member: the subset's weight is its share of the LoadBalancer's traffic whatever its number
// of members and backends, and inside a subset the members split it as above. Weights are reduced
// by their greatest common divisor to keep the files stable and small.
func balance(lb *LBState) (map[string][]bfeconf.Instance, map[string]int, LBReport) {
	type member struct {
		subset, name string
		instances    []bfeconf.Instance
		sum          int
		explicit     *int
	}
	type subset struct {
		weight  *int
		members []*member
		total   int // sum of the members' weights
	}
	members := map[string]*member{}
	subsets := map[string]*subset{}
	for _, b := range lb.Backends {
		key := b.Subset + "/" + b.Cluster
		mb := members[key]
		if mb == nil {
			mb = &member{subset: b.Subset, name: b.Cluster}
			members[key] = mb
		}
		mb.instances = append(mb.instances, bfeconf.Instance{Name: b.Key(), Addr: bfeconf.InstanceAddr(b.Addr.Addr()),
			Port: int(b.Addr.Port()), Weight: b.Weight})
		mb.sum += b.Weight
		if b.ClusterWeight != nil && (mb.explicit == nil || *b.ClusterWeight < *mb.explicit) {
			w := *b.ClusterWeight
			mb.explicit = &w
		}
		ss := subsets[b.Subset]
		if ss == nil {
			ss = &subset{}
			subsets[b.Subset] = ss
		}
		if b.SubsetWeight != nil && (ss.weight == nil || *b.SubsetWeight < *ss.weight) {
			w := *b.SubsetWeight
			ss.weight = &w
		}
	}
	report := LBReport{SubClusters: map[string]int{}}
	if len(members) == 0 {
		report.Reason = "no backends"
		return nil, nil, report
	}
	subs := map[string][]bfeconf.Instance{}
	weights := map[string]int{bfeconf.Blackhole: 0}
	var notes []string
	for _, key := range sortedMemberNames(members) {
		mb := members[key]
		label := reportName(mb.subset, mb.name)
		if mb.sum == 0 {
			notes = append(notes, fmt.Sprintf("member %s: every backend has weight 0", label))
			continue
		}
		w := mb.sum
		if mb.explicit != nil {
			w = *mb.explicit
		}
		ss := subsets[mb.subset]
		sort.Slice(mb.instances, func(i, j int) bool { return mb.instances[i].Name < mb.instances[j].Name })
		mb.explicit = &w
		ss.members = append(ss.members, mb)
		ss.total += w
	}
	// A member of subset s gets subsetWeight(s) × its weight / total(s), scaled to integers by the
	// least common multiple of the totals (or, when that grows too large, rounded on a fine scale).
	lcm, exact := 1, true
	for _, ss := range subsets {
		if ss.total > 0 {
			lcm = lcm / gcd(lcm, ss.total) * ss.total
			if lcm > 1<<20 {
				exact = false
				break
			}
		}
	}
	subsetWeight := func(ss *subset) int {
		if ss.weight == nil {
			return 1
		}
		return *ss.weight
	}
	weightSum := 0
	for _, ss := range subsets {
		if ss.total > 0 {
			weightSum += subsetWeight(ss)
		}
	}
	if weightSum == 0 {
		weightSum = 1
	}
	total, g := 0, 0
	for _, name := range sortedMemberNames(subsets) {
		ss := subsets[name]
		for _, mb := range ss.members {
			// A member (or subset) of weight 0 keeps its sub-cluster with weight 0: no traffic.
			w := 0
			switch {
			case ss.total == 0 || subsetWeight(ss) == 0 || *mb.explicit == 0:
			case exact:
				w = subsetWeight(ss) * *mb.explicit * (lcm / ss.total)
			default:
				w = max(int(float64(1<<20)*float64(subsetWeight(ss))/float64(weightSum)*float64(*mb.explicit)/float64(ss.total)), 1)
			}
			sub := subClusterName(lb.Name, mb.subset, mb.name)
			subs[sub] = mb.instances
			weights[sub] = w
			report.SubClusters[reportName(mb.subset, mb.name)] = w
			total += w
			g = gcd(g, w)
		}
	}
	if total == 0 {
		report.Reason = "no traffic: " + strings.Join(append(notes, "sub-cluster weights sum to 0"), "; ")
		report.SubClusters = map[string]int{}
		return nil, nil, report
	}
	for sub, w := range weights {
		weights[sub] = w / g
	}
	for name, w := range report.SubClusters {
		report.SubClusters[name] = w / g
	}
	report.Installed = true
	report.Reason = strings.Join(notes, "; ")
	return subs, weights, report
}

// reportName names a sub-cluster in reports: the member, or "<subset>/<member>".
func reportName(subset, member string) string {
	if subset == "" {
		return member
	}
	return subset + "/" + member
}

func sortedMemberNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// routes builds the basic and product (advanced) rules so that BFE sends each request where the
// README says: to the most specific matching route — exact host, then the longer "*.suffix" (one
// label, as BFE matches it), then "*"; exact path, then the longer prefix; then cookie+header,
// cookie, header, none (ingress-bfe's order) — falling through routes whose conditions do not hold.
//
// BFE looks up the basic rules first (exact host, else wildcard host; exact path, else longest
// prefix) and consults the product rules, in order, only when that lookup misses or lands on
// ADVANCED_MODE; it never returns to another basic rule. So a host+path served by one unconditional
// LoadBalancer is a basic rule; a host+path with conditional LoadBalancers defers to ADVANCED_MODE;
// and the product rules, sorted most specific first, hold every LoadBalancer that such a request
// may be meant for: the conditional ones, every route that overlaps an ADVANCED_MODE host+path
// (the fall-through when no condition holds), and the wildcard routes that cover another host
// (the fall-back when that host's basic rules miss the path).
func routes(lbs []*LBState) ([]bfeconf.BasicRule, []bfeconf.ProductRule) {
	type hostPath struct{ host, path string }
	groups := map[hostPath][]*LBState{}
	for _, lb := range lbs {
		k := hostPath{strings.ToLower(lb.Host), lb.Path}
		groups[k] = append(groups[k], lb)
	}
	keys := make([]hostPath, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].host+"\x00"+keys[i].path < keys[j].host+"\x00"+keys[j].path })

	basic := []bfeconf.BasicRule{}
	hosts := map[string]bool{}             // host → has an unconditional "/*" route
	advancedPaths := map[string][]string{} // host → paths of its ADVANCED_MODE rules
	var product []*LBState
	for _, k := range keys {
		g := groups[k]
		hosts[k.host] = hosts[k.host] || k.path == "/*" && len(g) == 1 && g[0].Cookie == nil && g[0].Header == nil
		rule := bfeconf.BasicRule{Path: []string{k.path}}
		if k.host != "*" {
			rule.Hostname = []string{k.host}
		}
		if len(g) == 1 && g[0].Cookie == nil && g[0].Header == nil {
			rule.ClusterName = g[0].Name
		} else {
			rule.ClusterName = bfeconf.AdvancedMode
			advancedPaths[k.host] = append(advancedPaths[k.host], k.path)
			product = append(product, g...)
		}
		basic = append(basic, rule)
	}
	for _, k := range keys {
		g := groups[k]
		if len(g) != 1 || g[0].Cookie != nil || g[0].Header != nil {
			continue // already a product rule
		}
		if fallThrough(k.host, k.path, hosts, advancedPaths) {
			product = append(product, g[0])
		}
	}
	sort.SliceStable(product, func(i, j int) bool { return moreSpecific(product[i], product[j]) })
	rules := make([]bfeconf.ProductRule, 0, len(product))
	for _, lb := range product {
		rules = append(rules, bfeconf.ProductRule{Cond: condition(&lb.LoadBalancer), ClusterName: lb.Name})
	}
	return basic, rules
}

// fallThrough reports whether the unconditional route host+path may be meant for a request that
// BFE sends to the product rules: one that lands on an ADVANCED_MODE rule it overlaps, on its own
// host or on a host it covers, or one for a covered host whose basic rules miss the path (hosts
// with an unconditional "/*" route never miss).
func fallThrough(host, path string, hosts map[string]bool, advancedPaths map[string][]string) bool {
	overlapsAdvanced := func(h string) bool {
		for _, p := range advancedPaths[h] {
			if pathsOverlap(path, p) {
				return true
			}
		}
		return false
	}
	if overlapsAdvanced(host) {
		return true
	}
	if !strings.HasPrefix(host, "*") {
		return false // an exact host is reached only through its own basic rules
	}
	for h, catchAll := range hosts {
		if h != host && hostCovers(host, h) && (!catchAll || overlapsAdvanced(h)) {
			return true
		}
	}
	return false
}

// hostCovers reports whether a route on wildcard host w matches requests for the hosts of route
// host h: "*" covers every other host; "*.s" covers the exact hosts one label under s.
func hostCovers(w, h string) bool {
	if w == "*" {
		return h != "*"
	}
	suffix := w[1:] // ".s"
	return !strings.HasPrefix(h, "*") && strings.HasSuffix(h, suffix) && !strings.Contains(strings.TrimSuffix(h, suffix), ".")
}

// pathsOverlap reports whether some request path matches both BFE path patterns ("/a/*" element
// prefix, "/a" exact).
func pathsOverlap(a, b string) bool {
	pa, pb := strings.HasSuffix(a, "*"), strings.HasSuffix(b, "*")
	switch {
	case pa && pb:
		ba, bb := strings.TrimSuffix(a, "/*"), strings.TrimSuffix(b, "/*")
		return elementPrefix(ba, bb) || elementPrefix(bb, ba)
	case pa:
		return elementPrefix(strings.TrimSuffix(a, "/*"), b)
	case pb:
		return elementPrefix(strings.TrimSuffix(b, "/*"), a)
	}
	return a == b
}

// elementPrefix reports whether base (without a trailing "/") is an element prefix of p.
func elementPrefix(base, p string) bool {
	return base == "" || p == base || strings.HasPrefix(p, base+"/")
}

func moreSpecific(a, b *LBState) bool {
	aw, bw := strings.HasPrefix(a.Host, "*"), strings.HasPrefix(b.Host, "*")
	if aw != bw {
		return !aw
	}
	if len(a.Host) != len(b.Host) {
		return len(a.Host) > len(b.Host)
	}
	ap, bp := strings.HasSuffix(a.Path, "*"), strings.HasSuffix(b.Path, "*")
	if ap != bp {
		return !ap
	}
	if len(a.Path) != len(b.Path) {
		return len(a.Path) > len(b.Path)
	}
	if pa, pb := matchPriority(&a.LoadBalancer), matchPriority(&b.LoadBalancer); pa != pb {
		return pa > pb
	}
	if a.Host != b.Host {
		return a.Host < b.Host
	}
	if a.Path != b.Path {
		return a.Path < b.Path
	}
	return a.Name < b.Name
}

func matchPriority(lb *LoadBalancer) int {
	switch {
	case lb.Cookie != nil && lb.Header != nil:
		return 40
	case lb.Cookie != nil:
		return 30
	case lb.Header != nil:
		return 20
	}
	return 10
}

// condition renders a LoadBalancer's route as a BFE condition expression. Product rules are consulted
// for every request that reaches ADVANCED_MODE or misses the basic rules, so the expression repeats
// host and path. "*.suffix" matches one label, like BFE's basic rules (BFE's condition primitives see
// the Host without its port).
func condition(lb *LoadBalancer) string {
	var parts []string
	switch host := strings.ToLower(lb.Host); {
	case host == "*":
	case strings.HasPrefix(host, "*."):
		// No backslashes: BFE keeps them literally in condition strings. Hostnames are letters,
		// digits, "-" and "_" (lbSpec validation), so "[.]" is the only escaping needed.
		parts = append(parts, "req_host_regmatch("+bfeconf.Quote(`(?i)^[^.]+`+strings.ReplaceAll(host[1:], ".", "[.]")+`$`)+")")
	default:
		parts = append(parts, "req_host_in("+bfeconf.Quote(host)+")")
	}
	switch {
	case lb.Path == "/*":
		// every path
	case strings.HasSuffix(lb.Path, "/*"):
		parts = append(parts, "req_path_element_prefix_in("+bfeconf.Quote(strings.TrimSuffix(lb.Path, "/*"))+", false)")
	default:
		parts = append(parts, "req_path_in("+bfeconf.Quote(lb.Path)+", false)")
	}
	if lb.Cookie != nil {
		parts = append(parts, "req_cookie_value_in("+bfeconf.Quote(lb.Cookie.Key)+", "+bfeconf.Quote(lb.Cookie.Value)+", false)")
	}
	if lb.Header != nil {
		parts = append(parts, "req_header_value_in("+bfeconf.Quote(lb.Header.Key)+", "+bfeconf.Quote(lb.Header.Value)+", false)")
	}
	if len(parts) == 0 {
		return "default_t()"
	}
	return strings.Join(parts, " && ")
}
