package fakebfe

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// Answer is what BFE would do with a request.
type Answer struct {
	// Status is 200 when a backend would be dialed successfully, else 500 (BFE answers 500 to
	// unknown hosts, unmatched routes, unbalanced clusters and failed dials).
	Status int
	// Cluster is the BFE cluster chosen by the route rules ("" when none matched).
	Cluster string
	// SubClusters are the sub-clusters GSLB may pick for the request (positive weight, sorted).
	SubClusters []string
	// Addr is the dial address of the first instance of the first sub-cluster (BFE's
	// fmt.Sprintf("%s:%d", Addr, Port)), when Status is 200.
	Addr string
	// Reason explains a 500, in BFE's words where it has some.
	Reason string
}

// productRoutes are one product's route rules as BFE 1.8.5 looks them up.
type productRoutes struct {
	exactHosts map[string]*pathTable // upper-case host → paths
	wildHosts  map[string]*pathTable // upper-case suffix (".EXAMPLE.TEST", "" for "*") → paths
	advanced   []advancedRule
	hasBasic   bool
}

type pathTable struct {
	exact  map[string]string // path → cluster
	prefix map[string]string // "/a/" → cluster
}

type advancedRule struct {
	cond    *bfeconf.Cond
	cluster string
}

// buildRoutes mirrors BFE's basic_rule_tree.go: no Hostname means "*", no Path means "*"; "*.x"
// and "*" are wildcard hosts; "/a*" and "/a/*" are the prefix "/a/".
func buildRoutes(s *bfeconf.Set) map[string]*productRoutes {
	out := map[string]*productRoutes{}
	get := func(product string) *productRoutes {
		pr := out[product]
		if pr == nil {
			pr = &productRoutes{exactHosts: map[string]*pathTable{}, wildHosts: map[string]*pathTable{}}
			out[product] = pr
		}
		return pr
	}
	for product, rules := range s.RouteRule.BasicRule {
		pr := get(product)
		pr.hasBasic = true
		for _, r := range rules {
			hosts, paths := r.Hostname, r.Path
			if len(hosts) == 0 {
				hosts = []string{"*"}
			}
			if len(paths) == 0 {
				paths = []string{"*"}
			}
			for _, h := range hosts {
				table, key := pr.exactHosts, strings.ToUpper(h)
				if strings.HasPrefix(h, "*") {
					table, key = pr.wildHosts, strings.ToUpper(h[1:])
				}
				pt := table[key]
				if pt == nil {
					pt = &pathTable{exact: map[string]string{}, prefix: map[string]string{}}
					table[key] = pt
				}
				for _, p := range paths {
					if strings.HasSuffix(p, "*") {
						k := strings.TrimSuffix(p, "*")
						if k != "" && !strings.HasSuffix(k, "/") {
							k += "/"
						}
						pt.prefix[k] = r.ClusterName
					} else {
						pt.exact[p] = r.ClusterName
					}
				}
			}
		}
	}
	for product, rules := range s.RouteRule.ProductRule {
		pr := get(product)
		for _, r := range rules {
			c, err := bfeconf.ParseCond(r.Cond)
			var pe *bfeconf.PolicyError
			if err != nil && !errors.As(err, &pe) {
				continue // refused at load; never reached
			}
			pr.advanced = append(pr.advanced, advancedRule{cond: c, cluster: r.ClusterName})
		}
	}
	return out
}

// hostPaths is BFE's host lookup in the basic-rule tree: the exact host, else the longest wildcard
// suffix — which must leave exactly one label, else only "*" can match. An exact host never falls
// back to a wildcard.
func (pr *productRoutes) hostPaths(host string) *pathTable {
	key := strings.ToUpper(host)
	if pt, ok := pr.exactHosts[key]; ok {
		return pt
	}
	best, found := "", false
	for suffix := range pr.wildHosts {
		if strings.HasSuffix(key, suffix) && (!found || len(suffix) > len(best)) {
			best, found = suffix, true
		}
	}
	if !found {
		return nil
	}
	if strings.Contains(strings.TrimSuffix(key, best), ".") {
		return pr.wildHosts[""]
	}
	return pr.wildHosts[best]
}

// lookup is BFE's path lookup: exact path first, else the longest prefix.
func (pt *pathTable) lookup(path string) (string, bool) {
	if c, ok := pt.exact[path]; ok {
		return c, true
	}
	if !strings.HasSuffix(path, "/") {
		path += "/"
	}
	best, found := "", false
	for k := range pt.prefix {
		if strings.HasPrefix(path, k) && (!found || len(k) > len(best)) {
			best, found = k, true
		}
	}
	return pt.prefix[best], found
}

// Route returns what BFE would do with r given the active configuration. An error means the fake
// cannot tell (a condition primitive it does not model), never that BFE would fail.
func (f *BFE) Route(r *http.Request) (Answer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(reason string) (Answer, error) {
		return Answer{Status: http.StatusInternalServerError, Reason: reason}, nil
	}
	if f.server == nil {
		return fail("no configuration loaded")
	}
	host := bfeconf.RequestHost(r)
	product := ""
	for tag, hosts := range f.server.HostRule.Hosts {
		for _, h := range hosts {
			if strings.EqualFold(h, host) {
				for p, tags := range f.server.HostRule.HostTags {
					for _, t := range tags {
						if t == tag {
							product = p
						}
					}
				}
			}
		}
	}
	if product == "" && f.server.HostRule.DefaultProduct != nil {
		product = *f.server.HostRule.DefaultProduct
	}
	if product == "" {
		return fail("no product found")
	}
	pr := f.routes[product]
	if pr == nil {
		return fail("no route rule found for product")
	}
	cluster := ""
	if pt := pr.hostPaths(host); pt != nil {
		if c, ok := pt.lookup(r.URL.Path); ok && c != bfeconf.AdvancedMode {
			cluster = c
		}
	}
	if cluster == "" {
		// ADVANCED_MODE or no basic match: the product rules, in order, and nothing else.
		for _, rule := range pr.advanced {
			ok, err := rule.cond.Match(r)
			if err != nil {
				return Answer{}, fmt.Errorf("condition %s: %w", rule.cond, err)
			}
			if ok {
				cluster = rule.cluster
				break
			}
		}
	}
	if cluster == "" {
		return fail("no rule match for this req")
	}
	a, err := f.balance(cluster)
	a.Cluster = cluster
	return a, err
}

// balance picks the sub-clusters and the dial address of cluster as BFE's GSLB would.
func (f *BFE) balance(cluster string) (Answer, error) {
	a := Answer{Status: http.StatusInternalServerError}
	if f.gslb == nil {
		a.Reason = "no balance for " + cluster
		return a, nil
	}
	weights, ok := f.gslb.Gslb.Clusters[cluster]
	subs := f.gslb.ClusterTable.Config[cluster]
	if !ok || subs == nil {
		a.Reason = "no balance for " + cluster
		return a, nil
	}
	for sub, w := range weights {
		if sub != bfeconf.Blackhole && w > 0 && len(subs[sub]) > 0 {
			a.SubClusters = append(a.SubClusters, sub)
		}
	}
	sort.Strings(a.SubClusters)
	if len(a.SubClusters) == 0 {
		a.Reason = "no backend for " + cluster
		return a, nil
	}
	for _, in := range subs[a.SubClusters[0]] {
		if in.Weight <= 0 {
			continue
		}
		addr := fmt.Sprintf("%s:%d", in.Addr, in.Port) // as BFE dials
		if _, _, err := net.SplitHostPort(addr); err != nil {
			a.Reason = "dial tcp: address " + addr + ": " + strings.TrimPrefix(err.Error(), "address "+addr+": ")
			return a, nil
		}
		a.Status, a.Addr = http.StatusOK, addr
		return a, nil
	}
	a.Reason = "no backend for " + cluster
	return a, nil
}
