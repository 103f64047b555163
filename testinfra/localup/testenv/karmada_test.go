package testenv

import "testing"

func TestKarmadaLoaders(t *testing.T) {
	all, err := KarmadaStandIns()
	if err != nil || len(all) != 4 {
		t.Fatalf("all stand-ins: %v, %d", err, len(all))
	}
	one, err := KarmadaStandIns("clusters.cluster.karmada.io")
	if err != nil || len(one) != 1 || one[0].Spec.Names.Kind != "Cluster" {
		t.Fatalf("Cluster stand-in: %v, %v", err, one)
	}
	if _, err := KarmadaStandIns("nope.karmada.io"); err == nil {
		t.Fatal("an unknown stand-in was not refused")
	}
	crds, err := KarmadaCRDs("policy/policy.karmada.io_propagationpolicies.yaml", "work/work.karmada.io_resourcebindings.yaml")
	if err != nil || len(crds) != 2 || crds[1].Spec.Names.Kind != "ResourceBinding" {
		t.Fatalf("pinned CRDs: %v, %v", err, crds)
	}
}
