// Command notification-service is a stand-in for the buyer notification
// service the ShipmentNotifier calls, for the quickstart: it accepts
// POST /buyers/{buyer}/notifications, answers 404 for buyers listed in
// -unknown, and logs each notification with its Idempotency-Key (a retried
// event arrives with the same key, so the service can drop the duplicate).
//
//	go run ./samples/notification-service -listen 127.0.0.1:9090 -unknown buyer-404
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "listen address")
	unknown := flag.String("unknown", "", "comma-separated buyers the service does not know (404)")
	flag.Parse()

	var mu sync.Mutex
	unknownBuyers := map[string]bool{}
	for _, b := range strings.Split(*unknown, ",") {
		if b != "" {
			unknownBuyers[b] = true
		}
	}
	seen := map[string]bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /buyers/{buyer}/notifications", func(w http.ResponseWriter, r *http.Request) {
		buyer, key := r.PathValue("buyer"), r.Header.Get("Idempotency-Key")
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		mu.Lock()
		defer mu.Unlock()
		if unknownBuyers[buyer] {
			log.Printf("404 unknown buyer %s (key %s)", buyer, key)
			http.Error(w, "unknown buyer", http.StatusNotFound)
			return
		}
		if seen[key] {
			log.Printf("duplicate %s: already notified, answering 200", key)
			return
		}
		seen[key] = true
		log.Printf("notified %s: %s (key %s)", buyer, body, key)
		w.WriteHeader(http.StatusAccepted)
	})
	// Forget a buyer's unknown status: POST /buyers/{buyer}/known.
	mux.HandleFunc("POST /buyers/{buyer}/known", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delete(unknownBuyers, r.PathValue("buyer"))
		mu.Unlock()
		log.Printf("buyer %s is known now", r.PathValue("buyer"))
	})
	log.Printf("notification service on http://%s", *listen)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
