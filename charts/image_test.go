package charts

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The image contract (README "Images"): one image per binary, entrypoint the binary, user
// 65532, read-only root filesystem, everything read from read-only mounts, the few paths a
// program writes on writable volumes.
const contractUID = 65532

// contractImages are the images of lbfed's binaries the charts run, by their name.
var contractImages = map[string]bool{"lbfed-controller": true, "lbcf-controller": true, "elb-driver": true, "elb-controller": true, "lbfed-probe": true}

// writtenPaths are, per program, the flags and environment variables naming where it writes;
// every other path it is given is read only.
var writtenPaths = map[string][]string{
	"elb-driver": {"--bfe-data-dir"}, // --backend=bfe: BFE's versioned configuration
	"kubectl":    {"HOME"},           // its discovery cache
}

// urlPathFlags take URL paths, not files.
var urlPathFlags = map[string]bool{"--path-prefix": true, "--raw": true}

// TestImageContract checks every container of every rendering (each values file of both charts,
// hooks included) against the image contract.
func TestImageContract(t *testing.T) {
	for _, chart := range []string{lbfedChart, lbcfChart} {
		checked := 0
		defer func() {
			if checked == 0 {
				t.Errorf("%s: no container checked", chart)
			}
		}()
		for _, f := range valuesFiles(t, chart) {
			t.Run(chart+"/"+filepath.Base(f), func(t *testing.T) {
				g := NewWithT(t)
				r, err := render(t, chart, chart, "kube-system", f)
				g.Expect(err).NotTo(HaveOccurred())
				objs := r.objects
				if chart == lbfedChart {
					split := splitLBFed(t, r)
					objs = append(split.host, split.karmada...)
				}
				for _, o := range objs {
					spec := podSpec(t, o)
					if spec == nil {
						continue
					}
					for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
						if problems := checkContainerContract(*spec, c); len(problems) > 0 {
							t.Errorf("%s, container %s:\n  %s", key(o), c.Name, strings.Join(problems, "\n  "))
						}
						checked++
					}
				}
			})
		}
	}
}

// TestImageContractCatches: the check fails a rendering that breaks the contract.
func TestImageContractCatches(t *testing.T) {
	g := NewWithT(t)
	r, err := render(t, lbfedChart, lbfedChart, "kube-system", "",
		"controller.extraArgs={--federation-driver-ca-file=/etc/ssl/corp.crt}", "controller.podSecurityContext.runAsUser=0",
		"controller.securityContext.readOnlyRootFilesystem=false")
	g.Expect(err).NotTo(HaveOccurred())
	split := splitLBFed(t, r)
	d := mustTyped[appsv1.Deployment](t, find(split.host, "Deployment", "lbfed-controller"))
	g.Expect(checkContainerContract(d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0])).To(ConsistOf(
		"runs as 0:65532 (non-root true), not 65532:65532",
		"root filesystem not read-only",
		"--federation-driver-ca-file=/etc/ssl/corp.crt: on the image's read-only filesystem, under no mount"))
}

// TestImageRegistry: global.imageRegistry moves every lbfed image, the kubectl image has its own.
func TestImageRegistry(t *testing.T) {
	for chart, set := range map[string][]string{
		lbfedChart: {"global.imageRegistry=registry.example.com/lbfed", "karmada.kubectl.image.registry=registry.example.com/k8s"},
		lbcfChart: {"global.imageRegistry=registry.example.com/lbfed", "tests.kubectl.image.registry=registry.example.com/k8s",
			"elbDriver.enabled=true", "elbDriver.radware.urls={https://a}", "elbDriver.radware.passwordSecret.name=p",
			"elbController.enabled=true", "elbController.alteon.urls={https://b}", "elbController.alteon.passwordSecret.name=p"},
	} {
		t.Run(chart, func(t *testing.T) {
			g := NewWithT(t)
			r, err := render(t, chart, chart, "kube-system", "", set...)
			g.Expect(err).NotTo(HaveOccurred())
			objs := r.objects
			if chart == lbfedChart {
				split := splitLBFed(t, r)
				objs = append(split.host, split.karmada...)
			}
			images := map[string]bool{}
			for _, o := range objs {
				if spec := podSpec(t, o); spec != nil {
					for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
						images[c.Image] = true
					}
				}
			}
			want := map[string][]string{
				lbfedChart: {"lbfed-controller", "lbcf-controller", "lbfed-probe"},
				lbcfChart:  {"lbcf-controller", "elb-driver", "elb-controller"},
			}[chart]
			var all []string
			for _, b := range want {
				all = append(all, "registry.example.com/lbfed/"+b+":0.1.0")
			}
			all = append(all, "registry.example.com/k8s/kubectl:v1.35.3")
			var got []string
			for i := range images {
				got = append(got, i)
			}
			g.Expect(got).To(ConsistOf(all))
		})
	}
}

// podSpec is the pod spec of a workload or pod (nil for other kinds).
func podSpec(t *testing.T, o *unstructured.Unstructured) *corev1.PodSpec {
	switch o.GetKind() {
	case "Deployment":
		return &mustTyped[appsv1.Deployment](t, o).Spec.Template.Spec
	case "Job":
		return &mustTyped[batchv1.Job](t, o).Spec.Template.Spec
	case "Pod":
		return &mustTyped[corev1.Pod](t, o).Spec
	}
	return nil
}

// checkContainerContract returns how a container of ours breaks the image contract; a user's
// extra container (elbDriver.extraContainers) is not ours.
func checkContainerContract(spec corev1.PodSpec, c corev1.Container) []string {
	image, _, _ := strings.Cut(path.Base(c.Image), ":")
	program := image
	switch {
	case contractImages[image]:
	case image == "kubectl":
	default:
		return nil
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(c.Command) > 0 {
		fail("command %v: the image's entrypoint is the program, the charts give args only", c.Command)
	}
	psc, sc := spec.SecurityContext, c.SecurityContext
	uid, gid, nonRoot := int64(-1), int64(-1), false
	if psc != nil {
		if psc.RunAsUser != nil {
			uid = *psc.RunAsUser
		}
		if psc.RunAsGroup != nil {
			gid = *psc.RunAsGroup
		}
		nonRoot = psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	}
	if sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
	}
	if uid != contractUID || gid != contractUID || !nonRoot {
		fail("runs as %d:%d (non-root %t), not %d:%d", uid, gid, nonRoot, contractUID, contractUID)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		fail("root filesystem not read-only")
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	type mount struct {
		path     string
		writable bool
	}
	var mounts []mount
	for _, m := range c.VolumeMounts {
		v := volumes[m.Name]
		fromObject := v.Secret != nil || v.ConfigMap != nil || v.Projected != nil
		if fromObject && !m.ReadOnly {
			fail("mount %s of volume %s: a Secret or ConfigMap mounted writable", m.MountPath, m.Name)
		}
		mounts = append(mounts, mount{m.MountPath, !m.ReadOnly && !fromObject})
	}
	under := func(p string) (mount, bool) {
		for _, m := range mounts {
			if p == m.path || strings.HasPrefix(p, m.path+"/") {
				return m, true
			}
		}
		return mount{}, false
	}
	writes := map[string]bool{}
	for _, w := range writtenPaths[program] {
		writes[w] = true
	}
	check := func(name, value string) {
		for _, p := range strings.Split(value, ",") {
			if !strings.HasPrefix(p, "/") {
				continue
			}
			m, ok := under(p)
			switch {
			case !ok:
				fail("%s=%s: on the image's read-only filesystem, under no mount", name, p)
			case writes[name] && !m.writable:
				fail("%s=%s: written, on a read-only mount", name, p)
			}
		}
	}
	for i, a := range c.Args {
		name, value, ok := strings.Cut(a, "=")
		switch {
		case ok && urlPathFlags[name], i > 0 && urlPathFlags[c.Args[i-1]]:
		case ok && strings.HasPrefix(name, "--"):
			check(name, value)
		case strings.HasPrefix(a, "/"):
			check("argument", a)
		}
	}
	for _, e := range c.Env {
		check(e.Name, e.Value)
	}
	// A writable volume other than an emptyDir (bfe.dataVolume) belongs to the pod's group.
	for _, m := range c.VolumeMounts {
		if v := volumes[m.Name]; !m.ReadOnly && v.EmptyDir == nil && v.Secret == nil && v.ConfigMap == nil && v.Projected == nil {
			if psc == nil || psc.FSGroup == nil || *psc.FSGroup != contractUID {
				fail("writable volume %s without fsGroup %d", m.Name, contractUID)
			}
		}
	}
	return problems
}
