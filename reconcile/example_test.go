package reconcile_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// A controller reconciles each Profile that the desired store reports
// changed, reading it afresh every time.
func Example() {
	desired := reconcile.NewDesiredStore()
	seen := make(chan string)
	profiles, err := reconcile.NewController("profile",
		reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			obj, ok := desired.Get(req.Key)
			if !ok {
				seen <- req.Key.String() + " is gone: clean up"
				return reconcile.Result{}, nil
			}
			seen <- fmt.Sprintf("%s at generation %d", req.Key, obj.GetObjectMeta().Generation)
			return reconcile.Result{}, nil
		}),
		reconcile.Options{Workers: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	desired.OnChange(reconcile.ForKind(v1alpha1.KindProfile, reconcile.EnqueueKey(profiles)))

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- profiles.Start(ctx) }()

	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata.Name = "coder"
	p.Default()
	desired.Set(p)
	fmt.Println(<-seen)

	tasks := int64(1024)
	p.Spec.Limits = &v1alpha1.Limits{Tasks: &tasks}
	desired.Set(p)
	fmt.Println(<-seen)

	desired.Delete(reconcile.KeyOf(p))
	fmt.Println(<-seen)

	cancel()
	fmt.Println("stopped:", <-stopped)
	// Output:
	// Profile/coder at generation 1
	// Profile/coder at generation 2
	// Profile/coder is gone: clean up
	// stopped: <nil>
}
