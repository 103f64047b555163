package bfe

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// benchModel is 100 LoadBalancers (10 hosts, a third with cookie conditions) with 100 backends each
// spread over 3 member clusters: 10,000 backends.
func benchModel(tb testing.TB) *Model {
	m := NewModel()
	for i := 0; i < 100; i++ {
		lb := LoadBalancer{Name: fmt.Sprintf("lb%03d", i), Host: fmt.Sprintf("h%d.example.test", i%10), Path: fmt.Sprintf("/svc%d/*", i/3)}
		if i%3 == 1 {
			lb.Cookie = &Match{Key: "canary", Value: "yes"}
		}
		if i%3 == 2 {
			lb.Header = &Match{Key: "X-Version", Value: "v2"}
		}
		for j := 0; j < 100; j++ {
			b := Backend{Cluster: fmt.Sprintf("member%d", j%3), Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i), byte(j / 250), byte(j%250 + 1)}), 8080),
				Weight: 1 + j%5}
			if err := m.PutBackend(lb, b); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return m
}

// BenchmarkGenerateValidate measures what every commit does before writing: generate, render,
// decode strictly and validate, for 10,000 backends across 100 LoadBalancers. "baseline" only
// encodes the model itself as JSON (the input's size), to compare against.
func BenchmarkGenerateValidate(b *testing.B) {
	m := benchModel(b)
	v := Versions{ServerData: "1", GslbData: "1"}
	b.Run("baseline-marshal-model", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := json.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Generate(m, v, GenerateOptions{})
		}
	})
	set := Generate(m, v, GenerateOptions{}).Set
	b.Run("validate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := set.Validate(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generate+render+parse+validate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			files, err := Generate(m, v, GenerateOptions{}).Set.Render()
			if err != nil {
				b.Fatal(err)
			}
			s, err := bfeconf.Parse(files)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Validate(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestBenchModelIsValid(t *testing.T) {
	m := benchModel(t)
	if _, n := m.Size(); n != 10000 {
		t.Fatalf("want 10000 backends, got %d", n)
	}
	gen := Generate(m, Versions{ServerData: "1", GslbData: "1"}, GenerateOptions{})
	if err := gen.Set.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, r := range gen.Reports {
		if !r.Installed || len(r.SubClusters) != 3 {
			t.Fatalf("%s: %+v", name, r)
		}
	}
}
