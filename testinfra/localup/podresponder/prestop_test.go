package podresponder

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPreStop(t *testing.T) {
	sleep := func(s int64) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}
	}
	exec := func(cmd ...string) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}
	}
	tests := []struct {
		name          string
		hooks         []*corev1.LifecycleHandler // one container each; nil: no preStop
		podGrace      *int64
		deletionGrace *int64
		want          time.Duration
	}{
		{name: "no hook", hooks: []*corev1.LifecycleHandler{nil}},
		{name: "sleep action", hooks: []*corev1.LifecycleHandler{sleep(5)}, want: 5 * time.Second},
		{name: "exec sleep", hooks: []*corev1.LifecycleHandler{exec("sleep", "7")}, want: 7 * time.Second},
		{name: "exec /bin/sleep fraction", hooks: []*corev1.LifecycleHandler{exec("/bin/sleep", "1.5")}, want: 1500 * time.Millisecond},
		{name: "exec sleep with unit", hooks: []*corev1.LifecycleHandler{exec("sleep", "4s")}, want: 4 * time.Second},
		{name: "sh -c", hooks: []*corev1.LifecycleHandler{exec("sh", "-c", "sleep 3")}, want: 3 * time.Second},
		{name: "/bin/sh -c then more", hooks: []*corev1.LifecycleHandler{exec("/bin/sh", "-c", "sleep 6 && nginx -s quit")}, want: 6 * time.Second},
		{name: "bash -c exec sleep", hooks: []*corev1.LifecycleHandler{exec("/bin/bash", "-c", "exec sleep 2;")}, want: 2 * time.Second},
		{name: "other command", hooks: []*corev1.LifecycleHandler{exec("nginx", "-s", "quit")}},
		{name: "script not starting with sleep", hooks: []*corev1.LifecycleHandler{exec("sh", "-c", "nginx -s quit; sleep 5")}},
		{name: "sleep without number", hooks: []*corev1.LifecycleHandler{exec("sh", "-c", "sleep infinity")}},
		{name: "http hook", hooks: []*corev1.LifecycleHandler{{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}}},
		{name: "longest container", hooks: []*corev1.LifecycleHandler{sleep(2), nil, exec("sleep", "9"), sleep(4)}, want: 9 * time.Second},
		{name: "capped by default grace", hooks: []*corev1.LifecycleHandler{exec("sleep", "3600")}, want: 30 * time.Second},
		{name: "capped by pod grace", hooks: []*corev1.LifecycleHandler{sleep(20)}, podGrace: ptr.To[int64](10), want: 10 * time.Second},
		{name: "capped by deletion grace", hooks: []*corev1.LifecycleHandler{sleep(20)}, podGrace: ptr.To[int64](60), deletionGrace: ptr.To[int64](2), want: 2 * time.Second},
		{name: "force delete", hooks: []*corev1.LifecycleHandler{sleep(20)}, deletionGrace: ptr.To[int64](0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.DeletionGracePeriodSeconds = tc.deletionGrace
			pod.Spec.TerminationGracePeriodSeconds = tc.podGrace
			for _, h := range tc.hooks {
				c := corev1.Container{Name: "c"}
				if h != nil {
					c.Lifecycle = &corev1.Lifecycle{PreStop: h}
				}
				pod.Spec.Containers = append(pod.Spec.Containers, c)
			}
			if got := PreStop(pod); got != tc.want {
				t.Errorf("PreStop = %v, want %v", got, tc.want)
			}
		})
	}
}
