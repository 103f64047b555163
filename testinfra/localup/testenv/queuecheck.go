package testenv

import (
	"fmt"
	"reflect"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ClassicQueues returns mgr with every controller added to it checked: it must run on client-go's
// rate-limited work queue (package ctrlqueue), not on controller-runtime's priority queue, whose
// shutdown can deadlock before v0.25 (kubernetes-sigs/controller-runtime#3538): a worker then never
// returns and the manager's stop runs out its grace period. A controller on the priority queue
// fails t when it is added.
func ClassicQueues(t testing.TB, mgr manager.Manager) manager.Manager {
	return &queueChecked{Manager: mgr, t: t}
}

type queueChecked struct {
	manager.Manager
	t testing.TB
}

func (m *queueChecked) Add(r manager.Runnable) error {
	if err := priorityQueued(r); err != nil {
		m.t.Error(err)
	}
	return m.Manager.Add(r)
}

// controllerPkg is where controller-runtime's controllers are implemented.
const controllerPkg = "sigs.k8s.io/controller-runtime/pkg/internal/controller"

// priorityQueued builds the work queue of r, if r is a controller, and says whether it is a
// priority queue (one with AddWithOpts) or cannot be told.
func priorityQueued(r manager.Runnable) error {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || v.Elem().Type().PkgPath() != controllerPkg {
		return nil
	}
	c := v.Elem()
	name := c.FieldByName("Name")
	newQueue := c.FieldByName("NewQueue")
	if !name.IsValid() || !newQueue.IsValid() || newQueue.Kind() != reflect.Func || newQueue.IsNil() || newQueue.Type().NumIn() != 2 {
		return fmt.Errorf("cannot tell the work queue of controller %v: %s changed", c.Type(), controllerPkg)
	}
	q := newQueue.Call([]reflect.Value{name, reflect.Zero(newQueue.Type().In(1))})[0].Elem()
	defer q.MethodByName("ShutDown").Call(nil)
	if q.MethodByName("AddWithOpts").IsValid() {
		return fmt.Errorf("controller %q runs on controller-runtime's priority queue (%s), whose shutdown can deadlock; choose its queue with ctrlqueue.Options", name.String(), q.Type())
	}
	return nil
}
