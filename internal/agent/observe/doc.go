// Package observe is roamd's TCP listener for people and Prometheus
// (metrics_addr): a Prometheus scrape of the node's job gauges,
// membership and version series and the standard Go, process and
// build-info collectors; and a live web view of the cluster (every node's
// load and memory over the last minutes, where each job runs, migrations
// and placements as they happen, pending work) sent to each page as one
// server-sent event stream. TLS and basic auth come from an
// exporter-toolkit web config file.
//
// What a page shows depends on who opened it: a user with a token minted
// for them over the roam socket (Tokens; the agent tells Mint the caller's
// uid from SO_PEERCRED) sees their own jobs by name and others' as counts;
// root sees everything; a page without a token sees node figures and
// counts only (Scope, Build).
//
// It must not import internal/agent: the agent's figures reach it as the
// funcs of Source, called without any lock of the caller held. Everything
// it takes from the network is bounded (connections, streams per user and
// in all, tokens, header sizes, time).
package observe
