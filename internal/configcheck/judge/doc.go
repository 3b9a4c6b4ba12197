// Package judge decides what a rendering of a config's objects is worth:
// [Judge] renders the data (fetching on-demand objects through package
// ondemand), checks the rendering with the check policy and haproxy -c
// ([Check]), and applies the embedded tests' result, stopping at the first
// phase that fails; the outcome is a [Verdict]. It also says whether a
// change adds to a failure the state has already ([AddsNoFailure]) and
// which changed objects make a failing state fail ([Attribute]).
//
// # Contract
//
//   - A verdict is a denial only for what the rendering, the policy,
//     haproxy or the tests said; anything that kept the judgement from
//     finishing (no render slot, the deadline, haproxy busy, an on-demand
//     fetch the API server did not answer) is Undecided, with Shed set when
//     it was for lack of capacity: never a denial from Gatehouse's load or
//     a stale read.
//   - A denial's text is the template's fail text, haproxy's alerts or the
//     policy's violations, whole: what a tenant may see of it is package
//     redact's to decide.
//   - haptic's configs are checked as haptic checks them ([AsChecked]:
//     exactly `default-path origin /etc/haproxy` reads as the check's own
//     directory); nothing else of a rendering is rewritten.
//   - [Attribute] puts back at most 16 suspects, one rendering and one
//     check each.
package judge
