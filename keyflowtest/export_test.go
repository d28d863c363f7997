package keyflowtest

// SetMaxFirings lowers the bound on the timers one call fires and returns
// a function that restores it.
func SetMaxFirings(n int) (restore func()) {
	old := maxFirings
	maxFirings = n
	return func() { maxFirings = old }
}
