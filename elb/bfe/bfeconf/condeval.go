package bfeconf

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
)

// Cond is a parsed route condition. Match evaluates it against a request with BFE's semantics for
// the primitives this project generates and a few more; the others report an error, so a routing
// test never silently gets an answer BFE would not give.
type Cond struct {
	src  string
	root node
}

func (c *Cond) String() string { return c.src }

// Match reports whether the request satisfies the condition.
func (c *Cond) Match(r *http.Request) (bool, error) { return c.root.eval(r) }

type node interface {
	eval(r *http.Request) (bool, error)
}

type andNode struct{ l, r node }
type orNode struct{ l, r node }
type notNode struct{ n node }

func (n andNode) eval(r *http.Request) (bool, error) {
	ok, err := n.l.eval(r)
	if err != nil || !ok {
		return false, err
	}
	return n.r.eval(r)
}

func (n orNode) eval(r *http.Request) (bool, error) {
	ok, err := n.l.eval(r)
	if err != nil || ok {
		return ok, err
	}
	return n.r.eval(r)
}

func (n notNode) eval(r *http.Request) (bool, error) {
	ok, err := n.n.eval(r)
	return !ok, err
}

// primitiveNode is one primitive: fetch a value from the request, match it. A failed fetch (a
// missing cookie) is "no match", as in BFE.
type primitiveNode struct {
	name  string
	fetch func(r *http.Request) (string, bool)
	match func(v string) bool
}

func (n primitiveNode) eval(r *http.Request) (bool, error) {
	if n.fetch == nil {
		return false, fmt.Errorf("primitive %s is not modelled by this evaluator", n.name)
	}
	v, ok := n.fetch(r)
	if !ok {
		return false, nil
	}
	return n.match(v), nil
}

// RequestHost is the Host BFE routes on: the Host header without its port.
func RequestHost(r *http.Request) string {
	return strings.SplitN(r.Host, ":", 2)[0]
}

// buildPrimitive checks the arguments BFE checks when it builds a primitive and returns its
// evaluator.
func buildPrimitive(name string, args []string, policy *[]error) (node, error) {
	if i, ok := regexpArg[name]; ok {
		if _, err := regexp.Compile(args[i]); err != nil {
			return nil, fmt.Errorf("compile regexp err %s", err)
		}
	}
	if notForRoutes[name] {
		*policy = append(*policy, fmt.Errorf("primitive %s is not allowed in route rules", name))
	}
	n := primitiveNode{name: name}
	host := func(r *http.Request) (string, bool) { return RequestHost(r), true }
	path := func(r *http.Request) (string, bool) { return r.URL.Path, true }
	fold := func(i int) bool { return i < len(args) && args[i] == "true" }
	switch name {
	case "default_t":
		n.fetch, n.match = func(*http.Request) (string, bool) { return "", true }, func(string) bool { return true }
	case "req_host_in":
		for _, h := range strings.Split(args[0], "|") {
			if strings.Contains(h, ":") {
				return nil, fmt.Errorf("port should not be included in host(%s)", h)
			}
		}
		n.fetch, n.match = host, inMatcher(args[0], true)
	case "req_host_regmatch":
		re := regexp.MustCompile(args[0])
		n.fetch, n.match = host, re.MatchString
	case "req_host_suffix_in":
		n.fetch, n.match = host, affixMatcher(args[0], true, strings.HasSuffix)
	case "req_path_in":
		n.fetch, n.match = path, inMatcher(args[0], fold(1))
	case "req_path_prefix_in":
		n.fetch, n.match = path, affixMatcher(args[0], fold(1), strings.HasPrefix)
	case "req_path_suffix_in":
		n.fetch, n.match = path, affixMatcher(args[0], fold(1), strings.HasSuffix)
	case "req_path_contain":
		n.fetch, n.match = path, affixMatcher(args[0], fold(1), strings.Contains)
	case "req_path_regmatch":
		n.fetch, n.match = path, regexp.MustCompile(args[0]).MatchString
	case "req_path_element_prefix_in":
		n.fetch, n.match = path, elementPrefixMatcher(args[0], fold(1))
	case "req_cookie_key_in":
		n.fetch = func(r *http.Request) (string, bool) {
			for _, k := range strings.Split(args[0], "|") {
				if _, err := r.Cookie(k); err == nil {
					return "", true
				}
			}
			return "", false
		}
		n.match = func(string) bool { return true }
	case "req_cookie_value_in":
		n.fetch = func(r *http.Request) (string, bool) {
			c, err := r.Cookie(args[0])
			if err != nil {
				return "", false
			}
			return c.Value, true
		}
		n.match = inMatcher(args[1], fold(2))
	case "req_header_key_in":
		n.fetch = func(r *http.Request) (string, bool) {
			for _, k := range strings.Split(args[0], "|") {
				if _, ok := r.Header[http.CanonicalHeaderKey(k)]; ok {
					return "", true
				}
			}
			return "", false
		}
		n.match = func(string) bool { return true }
	case "req_header_value_in":
		n.fetch = func(r *http.Request) (string, bool) { return r.Header.Get(args[0]), true }
		n.match = inMatcher(args[1], fold(2))
	case "req_method_in":
		n.fetch = func(r *http.Request) (string, bool) { return r.Method, true }
		n.match = inMatcher(args[0], false)
	}
	return n, nil
}

// inMatcher is BFE's InMatcher: "a|b" alternatives, optionally case-folded.
func inMatcher(patterns string, foldCase bool) func(string) bool {
	p := strings.Split(patterns, "|")
	if foldCase {
		for i := range p {
			p[i] = strings.ToUpper(p[i])
		}
	}
	sort.Strings(p)
	return func(v string) bool {
		if foldCase {
			v = strings.ToUpper(v)
		}
		i := sort.SearchStrings(p, v)
		return i < len(p) && p[i] == v
	}
}

func affixMatcher(patterns string, foldCase bool, has func(s, affix string) bool) func(string) bool {
	p := strings.Split(patterns, "|")
	return func(v string) bool {
		for _, pat := range p {
			if foldCase && has(strings.ToUpper(v), strings.ToUpper(pat)) || !foldCase && has(v, pat) {
				return true
			}
		}
		return false
	}
}

// elementPrefixMatcher is BFE's PathElementPrefixMatcher: "/a" matches /a, /a/ and /a/b, not /ab.
func elementPrefixMatcher(patterns string, foldCase bool) func(string) bool {
	p := strings.Split(patterns, "|")
	for i, v := range p {
		if !strings.HasSuffix(v, "/") {
			v += "/"
		}
		if foldCase {
			v = strings.ToUpper(v)
		}
		p[i] = v
	}
	return func(v string) bool {
		if !strings.HasSuffix(v, "/") {
			v += "/"
		}
		if foldCase {
			v = strings.ToUpper(v)
		}
		for _, pat := range p {
			if strings.HasPrefix(v, pat) {
				return true
			}
		}
		return false
	}
}
