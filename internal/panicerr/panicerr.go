// Package panicerr holds the error a recovered panic of the application's
// code is reported with, shared by the key actors (folds, timers, codecs)
// and the snapshot store (the output partitioner), which cannot import one
// another.
package panicerr

import "errors"

// ErrPanicked is matched by the failure a recovered panic of the
// application's code causes (keyflow.ErrPanicked).
var ErrPanicked = errors.New("panic in the flow")
