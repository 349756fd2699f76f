// Package node assembles one tollgate server from a config file and
// options: the store (memory or Redis), the gateway and its HTTP
// listener, the autoscaled pools (local processes or Kubernetes), the
// local Cloud Map registry, the live view, the admin endpoints and, with
// an rls config directory, the Envoy rate limit service. It is what
// `tollgate serve` runs, so tests and other programs can build the same
// node without the binary; package main only turns flags into [Options]
// and signals into [Node.Run]'s context and [Node.TriggerReload].
//
// node owns the wiring and the lifecycle, never a part's logic: it reads
// no flag, handles no OS signal and never exits the process.
//
// # Lifecycle
//
//  1. [New] loads the config (package config), opens the store, builds
//     every part and listens; it starts no goroutine. A node that is
//     never run must be [Node.Close]d.
//  2. [Node.Run] serves until its context ends or a part fails, then
//     shuts down in two phases (drain, then stop) and returns once every
//     goroutine it started has stopped.
//  3. [Node.Reload] (POST /v1/admin/reload) or [Node.TriggerReload]
//     (SIGHUP) reloads every part loaded from files, each all-or-nothing;
//     shutdown never waits for a reload's file read.
package node
