package intern

import (
	"reflect"
	"testing"
)

func mapID(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }

// The record transforms are tested through lbcf/controller's CacheOptions, with the engine's
// backend label (intern_test.go and cached_bytes_test.go there); these are the tables alone.

// MapInterner: equal maps are one, nil stays nil, contents that would read alike unprefixed
// stay apart.
func TestMapInterner(t *testing.T) {
	in := NewMapInterner(16)
	a := in.Share(map[string]string{"weight": "1", "cluster": "m1"})
	b := in.Share(map[string]string{"cluster": "m1", "weight": "1"})
	if mapID(a) != mapID(b) {
		t.Fatal("equal maps are not shared")
	}
	if in.Share(nil) != nil {
		t.Fatal("nil became a map")
	}
	x := in.Share(map[string]string{"a:1": "b"})
	y := in.Share(map[string]string{"a": "1:b"})
	if mapID(x) == mapID(y) || y["a"] != "1:b" {
		t.Fatalf("ambiguous contents shared: %v %v", x, y)
	}
}

// internTable keeps an entry while it is met again within two generations; a hit in the older
// generation brings it back to the current one.
func TestInternTableGenerations(t *testing.T) {
	tb := internTable[int]{size: 2}
	tb.put("a", 1)
	tb.put("b", 2)
	tb.put("c", 3) // a new generation: a and b are the older one
	if v, ok := tb.getKey([]byte("a")); !ok || v != 1 {
		t.Fatalf("a: %v %v, want it from the older generation", v, ok)
	}
	tb.put("d", 4) // current (c, a) full: b's generation goes
	if _, ok := tb.get("b"); ok {
		t.Fatal("b outlived two generations")
	}
	if v, ok := tb.get("a"); !ok || v != 1 {
		t.Fatalf("a: %v %v, want it kept (it was met again)", v, ok)
	}
}
