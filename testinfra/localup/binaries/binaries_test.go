package binaries

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

func TestDefaultBinaryName(t *testing.T) {
	tests := []struct{ pkg, want string }{
		{"k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"},
		{"github.com/karmada-io/karmada/cmd/scheduler", "scheduler"},
		{"go.etcd.io/etcd/server/v3", "server"},
		{"example.com/hello", "hello"},
		{"v2", "v2"},
	}
	for _, tc := range tests {
		if got := defaultBinaryName(tc.pkg); got != tc.want {
			t.Errorf("defaultBinaryName(%q) = %q, want %q", tc.pkg, got, tc.want)
		}
	}
}

// fakeRepo lays out a repository with one tiny, stdlib-only scratch module under e2e/upstream,
// so the whole build path (go build, rename, publish, cache) runs in a second.
func fakeRepo(t *testing.T) (root string, g group) {
	t.Helper()
	root = t.TempDir()
	mod := filepath.Join(root, upstreamDir, "hello")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.25.0\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello from the cache\") }\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, group{name: "hello", commands: []command{{"example.com/hello", "greeter"}}}
}

func TestBuildPublishesAndCaches(t *testing.T) {
	g := NewWithT(t)
	root, grp := fakeRepo(t)
	binDir := t.TempDir()
	key, err := grp.key(root)
	g.Expect(err).NotTo(HaveOccurred())
	killed := filepath.Join(binDir, ".tmp-hello-"+key+"-123")
	g.Expect(os.MkdirAll(killed, 0o755)).To(Succeed(), "what a killed build leaves")

	_, err = locate(binDir, root, []group{grp})
	g.Expect(errors.Is(err, ErrNotBuilt)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("make tools"))

	// Two concurrent builds of the same group: one builds, the other waits on the lock and then
	// finds it built.
	var wg sync.WaitGroup
	results := make([][]GroupResult, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = build(t.Context(), BuildOptions{BinDir: binDir}, root, []group{grp})
		}()
	}
	wg.Wait()
	g.Expect(errs).To(HaveEach(BeNil()))
	cached := 0
	for _, r := range results {
		if r[0].Cached {
			cached++
		}
	}
	g.Expect(cached).To(Equal(1), "exactly one of two concurrent builds did the work")

	set, err := locate(binDir, root, []group{grp})
	g.Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(set.Path("greeter")).Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal("hello from the cache\n"))
	g.Expect(filepath.Base(filepath.Dir(set.Path("greeter")))).To(HavePrefix("hello-"))
	leftovers, _ := filepath.Glob(filepath.Join(binDir, ".tmp-*"))
	g.Expect(leftovers).To(BeEmpty(), "temporary build folders are removed")

	// A changed pin means a different key: the old build no longer counts.
	g.Expect(os.WriteFile(filepath.Join(root, upstreamDir, "hello", "go.mod"), []byte("module example.com/hello\n\ngo 1.25.1\n"), 0o644)).To(Succeed())
	_, err = locate(binDir, root, []group{grp})
	g.Expect(errors.Is(err, ErrNotBuilt)).To(BeTrue())
	res, err := build(t.Context(), BuildOptions{BinDir: binDir}, root, []group{grp})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res[0].Cached).To(BeFalse())
	g.Expect(res[0].Dir).NotTo(Equal(filepath.Dir(set.Path("greeter"))))
}

func TestBuildFailureIsNotPublished(t *testing.T) {
	g := NewWithT(t)
	root, grp := fakeRepo(t)
	g.Expect(os.WriteFile(filepath.Join(root, upstreamDir, "hello", "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644)).To(Succeed())
	binDir := t.TempDir()
	_, err := build(t.Context(), BuildOptions{BinDir: binDir}, root, []group{grp})
	g.Expect(err).To(MatchError(ContainSubstring("undefined")), "the compiler's message is in the error")
	_, err = locate(binDir, root, []group{grp})
	g.Expect(errors.Is(err, ErrNotBuilt)).To(BeTrue())
	entries, _ := os.ReadDir(binDir)
	for _, e := range entries {
		g.Expect(strings.HasPrefix(e.Name(), ".tmp-")).To(BeFalse(), "failed build left %s", e.Name())
	}
}

func TestKeyCoversModuleFiles(t *testing.T) {
	g := NewWithT(t)
	root, grp := fakeRepo(t)
	k1, err := grp.key(root)
	g.Expect(err).NotTo(HaveOccurred())
	k2, err := grp.key(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k1).To(Equal(k2), "stable")

	g.Expect(os.WriteFile(filepath.Join(root, upstreamDir, "hello", "go.sum"), []byte("x v1 h1:y\n"), 0o644)).To(Succeed())
	k3, err := grp.key(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k3).NotTo(Equal(k1), "go.sum is part of the key")

	other := grp
	other.k8sVersionStamps = true
	k4, err := other.key(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k4).NotTo(Equal(k3), "the recipe is part of the key")

	// main.go is not a pin: editing it does not change the key.
	g.Expect(os.WriteFile(filepath.Join(root, upstreamDir, "hello", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)).To(Succeed())
	k5, err := grp.key(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k5).To(Equal(k3))
}

func TestSets(t *testing.T) {
	g := NewWithT(t)
	local, err := setGroups("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local).To(HaveLen(len(groups)), "the default set is localup's")
	kind, err := setGroups(KindSet)
	g.Expect(err).NotTo(HaveOccurred())
	// One binary name, one group: a set's Path must not depend on the order of its groups.
	seen := map[string]string{}
	for _, grp := range kind {
		for _, c := range grp.commands {
			g.Expect(seen).NotTo(HaveKey(c.bin), "%s in %s and %s", c.bin, seen[c.bin], grp.name)
			seen[c.bin] = grp.name
		}
	}
	g.Expect(seen).To(HaveKey(Kubectl))
	g.Expect(seen).To(HaveKey(Kubelet))
	_, err = setGroups("nope")
	g.Expect(err).To(HaveOccurred())
}

// TestPinnedGroupsResolve checks the real scratch modules: every group has its module files and
// every command's package is required by its go.mod (as a tool), so a build cannot fail on a
// missing requirement.
func TestPinnedGroupsResolve(t *testing.T) {
	g := NewWithT(t)
	root, err := RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	for _, grp := range append(append([]group{}, groups...), kindGroups...) {
		modFile := filepath.Join(root, upstreamDir, grp.name, "go.mod")
		b, err := os.ReadFile(modFile)
		g.Expect(err).NotTo(HaveOccurred())
		for _, c := range grp.commands {
			g.Expect(string(b)).To(ContainSubstring(c.pkg), "%s lists tool %s", modFile, c.pkg)
		}
		_, err = os.Stat(filepath.Join(root, upstreamDir, grp.name, "go.sum"))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = grp.key(root)
		g.Expect(err).NotTo(HaveOccurred())
	}
}
