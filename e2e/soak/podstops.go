package soak

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
)

// podStops tells when the processes of the workload's pods stopped (for attribution, Cause), from
// successive lists of each member's pods. Pods are known by UID: kwok hands a freed address to
// the next pod at once, so the address serving again says nothing of the pod that had it.
type podStops struct {
	pods map[types.UID]*seenPod
}

type seenPod struct {
	scope    string    // member/namespace: one list covers one scope
	addr     string    // ip:port
	lastSeen time.Time // listed serving
	stopAt   time.Time // deleted: when its process stops (deletion requested + preStop)
	reported bool
}

// observe takes the list of scope's pods made at now and returns the stops it reveals: a pod
// that turned terminal or left the list. A deleted pod stopped when its preStop ended, however
// late a list shows it; one never seen deleted, sometime after it was last seen serving (that
// time is recorded: never later than the stop).
func (s *podStops) observe(scope string, pods []corev1.Pod, now time.Time) []PodStop {
	if s.pods == nil {
		s.pods = map[types.UID]*seenPod{}
	}
	var out []PodStop
	// stop records p's stop, seen at the latest at.
	stop := func(p *seenPod, at time.Time) {
		if p.reported {
			return
		}
		p.reported = true
		if !p.stopAt.IsZero() && p.stopAt.Before(at) {
			at = p.stopAt
		}
		out = append(out, PodStop{Addr: p.addr, At: at})
	}
	listed := map[types.UID]bool{}
	for i := range pods {
		pod := &pods[i]
		if pod.Status.PodIP == "" || pod.Annotations[podresponder.StoppedAnnotation] == "true" {
			continue // not serving yet, or killed (killPod records that stop itself)
		}
		listed[pod.UID] = true
		p := s.pods[pod.UID]
		if p == nil {
			p = &seenPod{scope: scope, addr: pod.Status.PodIP + ":8080", lastSeen: now}
			s.pods[pod.UID] = p
		}
		if pod.DeletionTimestamp != nil && p.stopAt.IsZero() {
			p.stopAt = processStop(pod)
		}
		switch {
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			stop(p, finishedAt(pod, now))
		case pod.DeletionTimestamp == nil:
			p.lastSeen = now
		}
	}
	for uid, p := range s.pods {
		if p.scope == scope && !listed[uid] {
			if p.stopAt.IsZero() {
				stop(p, p.lastSeen) // never seen deleted: it stopped after it was last seen serving
			} else {
				stop(p, now)
			}
			delete(s.pods, uid)
		}
	}
	return out
}

// processStop is when a deleted pod's process stops: its deletion was asked for grace period
// seconds before its deletionTimestamp (whole seconds: up to one early), and its preStop hook
// then keeps it serving.
func processStop(pod *corev1.Pod) time.Time {
	asked := pod.DeletionTimestamp.Time
	if pod.DeletionGracePeriodSeconds != nil {
		asked = asked.Add(-time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
	}
	return asked.Add(podresponder.PreStop(pod))
}

// finishedAt is when the kubelet reported the pod's containers ended (now when it did not say).
func finishedAt(pod *corev1.Pod, now time.Time) time.Time {
	at := now
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() && t.FinishedAt.Time.Before(at) {
			at = t.FinishedAt.Time
		}
	}
	return at
}
