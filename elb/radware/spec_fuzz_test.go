package radware

import (
	"net/netip"
	"strconv"
	"testing"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbspec"
)

// FuzzParseLoadBalancer: an lbSpec, from any user, parses to a load balancer the device accepts
// (IPv4 VIP, port 1 or 9..65534, TCP or UDP, a known method and health check) or is refused; what
// parses is canonical: its lbInfo parses to the same load balancer.
func FuzzParseLoadBalancer(f *testing.F) {
	f.Add("10.0.0.1", "80", "tcp", "rr", "")
	f.Add(" 10.0.0.1 ", "9", "UDP", "Hash", "icmp")
	f.Add("::1", "80", "", "", "")
	f.Add("10.0.0.1", "65535", "tcp", "lc", "http")
	f.Add("0.0.0.0", "1", "TCP", "rr", "none")
	f.Fuzz(func(t *testing.T, vip, port, protocol, method, hc string) {
		spec := map[string]string{lbspec.KeyVIP: vip, lbspec.KeyPort: port}
		if protocol != "" {
			spec[lbspec.KeyProtocol] = protocol
		}
		if method != "" {
			spec[lbspec.KeyMethod] = method
		}
		if hc != "" {
			spec[lbspec.KeyHealthCheck] = hc
		}
		lb, err := ParseLoadBalancer(spec)
		if err != nil {
			return
		}
		if !lb.VIP.Is4() || lb.VIP.IsUnspecified() {
			t.Fatalf("VIP %s accepted", lb.VIP)
		}
		if !(lb.Port == 1 || (lb.Port >= 9 && lb.Port <= 65534)) {
			t.Fatalf("port %d accepted", lb.Port)
		}
		if lb.Protocol != "TCP" && lb.Protocol != "UDP" {
			t.Fatalf("protocol %q accepted", lb.Protocol)
		}
		if _, ok := methods[lb.Method]; !ok {
			t.Fatalf("method %q accepted", lb.Method)
		}
		again, err := ParseLoadBalancer(lb.Info())
		if err != nil {
			t.Fatalf("lbInfo %v of %v does not parse: %v", lb.Info(), spec, err)
		}
		if again != lb {
			t.Fatalf("lbInfo round trip: %+v → %+v", lb, again)
		}
	})
}

// FuzzParseBackend: a backend address and weight parse to an IPv4 real server on port 5..65534
// with weight 1..48, or are refused; the canonical address parses back to the same backend.
func FuzzParseBackend(f *testing.F) {
	f.Add("10.12.0.7:8080", "1")
	f.Add(" 10.12.0.7:5 ", "48")
	f.Add("[::1]:80", "")
	f.Add("10.0.0.1:65535", "0")
	f.Add("10.0.0.1:80", " 12 ")
	f.Fuzz(func(t *testing.T, addr, weight string) {
		params := map[string]string{}
		if weight != "" {
			params[lbcfv1beta1.ParamWeight] = weight
		}
		b, err := ParseBackend(addr, params)
		if err != nil {
			return
		}
		if !b.IP.Is4() || b.Port < 5 || b.Port > 65534 || b.Weight < MinWeight || b.Weight > MaxWeight {
			t.Fatalf("%q weight %q accepted as %+v", addr, weight, b)
		}
		again, err := ParseBackend(netip.AddrPortFrom(b.IP, uint16(b.Port)).String(), map[string]string{lbcfv1beta1.ParamWeight: strconv.Itoa(b.Weight)})
		if err != nil || again != b {
			t.Fatalf("round trip of %+v: %+v, %v", b, again, err)
		}
	})
}

// FuzzParseAttributes: a LoadBalancer's attributes give health-check timings within the device's
// ranges (0 meaning the frontend's setting), or are refused.
func FuzzParseAttributes(f *testing.F) {
	f.Add("tcp", "2", "4", "2", "")
	f.Add("none", "2", "", "", "")
	f.Add("tcp", "601", "0", "64", "x")
	f.Add("icmp", " 10 ", "63", "1", "")
	f.Fuzz(func(t *testing.T, hc, interval, retries, restore, other string) {
		lb, err := ParseLoadBalancer(map[string]string{lbspec.KeyVIP: "10.0.0.1", lbspec.KeyPort: "80", lbspec.KeyHealthCheck: hc})
		if err != nil {
			return
		}
		attrs := map[string]string{}
		for k, v := range map[string]string{KeyHealthCheckInterval: interval, KeyHealthCheckRetries: retries, KeyHealthCheckRestore: restore, other: "1"} {
			if v != "" && k != "" {
				attrs[k] = v
			}
		}
		h, err := ParseAttributes(lb, attrs)
		if err != nil {
			return
		}
		if h.Interval < 0 || h.Interval > MaxHealthInterval || h.Retries < 0 || h.Retries > MaxHealthRetries || h.Restore < 0 || h.Restore > MaxHealthRetries {
			t.Fatalf("%v accepted as %+v", attrs, h)
		}
	})
}
