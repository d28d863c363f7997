// Package logkey shows a record's key in a log field.
package logkey

import "fmt"

// maxShown is how much of a long key a log shows: a key may be what is too
// large (up to a record's size), and a log line of a megabyte helps no one.
const maxShown = 64

// Clip is key for a log field: key itself, or when longer than 64 bytes
// its first 64 quoted and its size.
func Clip(key string) string {
	if len(key) > maxShown {
		return fmt.Sprintf("%.*q… (%d bytes)", maxShown, key, len(key))
	}
	return key
}

// Quote is key for an error message: key quoted, or when longer than 64
// bytes its first 64 quoted and its size (a key up to half a record's
// size reaches the key actors, whose errors name it).
func Quote(key string) string {
	if len(key) > maxShown {
		return fmt.Sprintf("%.*q… (%d bytes)", maxShown, key, len(key))
	}
	return fmt.Sprintf("%q", key)
}
