// Package admissionload sends a steady, mixed load of admissions through
// kube-apiserver to every Gatehouse module and classifies each answer: an
// expected allow, an expected denial (with the module's own message), or a
// failure. The install tests (test/install) run it while Gatehouse is
// upgraded, killed and drained, and assert on its counts.
//
// A failure is anything a user would see as Gatehouse letting them down: a
// webhook call error ("failed calling webhook", a timeout, connection
// refused, a 5xx), a conversion that did not happen, a denial for another
// reason than the expected one, and an allow of a request that must be
// denied. The last one matters because a webhook with failurePolicy Ignore
// that cannot be called admits silently: every module's share of the load
// holds a request that only a working webhook denies. kube-apiserver's own
// metrics (Witness) are the second witness of the calls that failed open.
//
// Every write is a server-side dry run except the fixtures: the load piles
// up no objects and changes nothing, so it can run for as long as a test
// needs, and kube-apiserver still calls the webhooks (their sideEffects are
// None) and the conversion webhook (a dry-run create is converted to the
// storage version).
package admissionload
