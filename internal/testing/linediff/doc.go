// Package linediff names where two texts first differ, for a test's
// failure message when a whole rendering must stay the same. Test support
// only: nothing in the product imports it.
package linediff
