package soak

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A soak pod: preStop sleep 10 s, grace 30 s.
func soakPod(uid, ip string) corev1.Pod {
	grace := int64(30)
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "web",
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 10}}}}}},
		Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning},
	}
}

func deleted(p corev1.Pod, asked time.Time) corev1.Pod {
	grace := int64(30)
	// The apiserver stores whole seconds.
	at := metav1.NewTime(asked.Add(30 * time.Second).Truncate(time.Second))
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &at, &grace
	return p
}

func repeat(list []corev1.Pod, n int) [][]corev1.Pod {
	out := make([][]corev1.Pod, n)
	for i := range out {
		out[i] = list
	}
	return out
}

// The soak's episode 13 (seed 46): a rollout deleted a pod, its process stopped 10 s later (the
// preStop) while the leader was dead, and the next surge pod got the freed address at once. The
// stop must still be recorded, at the end of the preStop, however late the lists show it.
func TestPodStopsSurviveAddressReuseAndLateLists(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 22, 14, 50, 0, time.UTC)
	asked := t0.Add(1700 * time.Millisecond)
	wantStop := asked.Add(10 * time.Second)
	old, next := soakPod("old", "127.41.193.3"), soakPod("next", "127.41.193.3")
	for _, tc := range []struct {
		name  string
		lists [][]corev1.Pod // one a second from t0 (the last at last, if set)
		last  time.Time
		slack time.Duration // how much earlier than the real stop the recorded one may be
	}{
		{"address reused by the next pod", append(append([][]corev1.Pod{{old}, {old}},
			repeat([]corev1.Pod{deleted(old, asked)}, 10)...), []corev1.Pod{next}, []corev1.Pod{next}), time.Time{}, 2 * time.Second},
		{"lists late: gone seen 9 s after the stop", [][]corev1.Pod{
			{old}, {old}, {deleted(old, asked)}, {}}, wantStop.Add(9 * time.Second), 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s podStops
			var stops []PodStop
			at := t0
			for i, list := range tc.lists {
				if i == len(tc.lists)-1 && !tc.last.IsZero() {
					at = tc.last
				}
				stops = append(stops, s.observe("m1/soak-0", list, at)...)
				at = at.Add(time.Second)
			}
			if len(stops) != 1 || stops[0].Addr != "127.41.193.3:8080" {
				t.Fatalf("stops %+v, want one of 127.41.193.3:8080", stops)
			}
			if d := stops[0].At.Sub(wantStop); d > 0 || d < -tc.slack {
				t.Fatalf("stop recorded at %s, the process stopped at %s", stops[0].At.Format("15:04:05.000"), wantStop.Format("15:04:05.000"))
			}
			// The failures of the episode are then the stopped pod's, not the control plane's.
			f := FailedRequest{At: wantStop.Add(200 * time.Millisecond), VIP: "127.7.0.1:80", Reason: "reset"}
			faults := []Window{{Kind: KillLbfedLeader, Start: t0.Add(4 * time.Second), End: t0.Add(38 * time.Second)}}
			if c := Cause(f, stops, faults); Violation(c) {
				t.Fatalf("a request failed 0.2 s after the stop: %s", c)
			}
		})
	}
}
