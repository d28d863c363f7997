package itest

import (
	"os"
	"testing"
)

func TestZZPanic(t *testing.T) {
	Brokers(t)
	if os.Getenv("ZZ_MODE") == "panic" {
		panic("boom")
	}
	if os.Getenv("ZZ_MODE") == "fail" {
		t.Fatal("deliberate failure")
	}
}
