// Package forward is the pool's data path: it carries one request to the
// instance it was routed to and its answer back, as a revision's proxy.
//
// The common request (no body, replayable, no upgrade) takes the
// forwarder: HTTP/1.1 over kept-alive connections of its own, in the
// request's goroutine, the answer read with net/http's own parser and a
// stream flushed as it comes. Every other request goes through
// httputil.ReverseProxy. Both send the instance the same request
// (X-Forwarded-*, hop-by-hop headers dropped, the client's Host) and the
// client the same answer, and a failure is always answered with an error
// status: 504 once the request's deadline has passed, 502 otherwise, with
// the instance's exit when it died under the request (Target.AwaitExit).
//
// The package knows nothing of engines, revisions or traffic: the pool
// chooses the Target and bounds the request by its context.
package forward
