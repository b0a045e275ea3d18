package workers_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/workers"
)

type forecastIn struct {
	City string `json:"city" jsonschema:"the city to forecast"`
	Days int    `json:"days,omitempty" jsonschema:"how many days ahead; 1 when absent"`
}

type forecastOut struct {
	City    string    `json:"city"`
	Summary string    `json:"summary"`
	At      time.Time `json:"at"`
}

// A tool team's whole worker: declare the tool and its methods, then Run until the
// process is told to stop. Start as many such processes as the load needs; calls are
// spread over them, and each one drains when it stops.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.Name("weather-worker"), nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	w := workers.New(nc, workers.Tool{ID: "weather", Title: "Weather", Version: "1.0.0"})
	w.Handle(workers.Func("forecast", "Forecast the weather in a city",
		func(ctx context.Context, c *workers.Call, in forecastIn) (forecastOut, error) {
			if in.City == "" {
				return forecastOut{}, &workers.Error{Code: "unknown_city", Message: "no city given", Status: 404}
			}
			if err := c.Progress(1, 2, "asking the met office"); err != nil {
				return forecastOut{}, err
			}
			return forecastOut{City: in.City, Summary: "sunny", At: time.Now()}, nil
		}))
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// A worker that keeps state between calls, in its tool's state bucket: here, how many
// times each city was asked for. The connection takes its inboxes under the tool's,
// which the tool's credentials allow; an admin made the bucket before
// (toolgate state create weather).
func ExampleWorker_State() {
	ctx := context.Background()
	nc, err := nats.Connect("tls://nats.example.com:4222", nats.UserCredentials("weather.creds"),
		nats.RootCAs("ca.pem"), workers.Inbox("weather"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	w := workers.New(nc, workers.Tool{ID: "weather", Title: "Weather", Version: "1.0.0"})
	asked, err := w.State(ctx)
	if err != nil {
		log.Fatal(err) // workers.ErrNoState: the bucket is not made yet
	}
	w.Handle(workers.Func("forecast", "Forecast the weather in a city",
		func(ctx context.Context, c *workers.Call, in forecastIn) (forecastOut, error) {
			key := base64.RawURLEncoding.EncodeToString([]byte(in.City)) // a key holds no spaces
			n := 0
			if e, err := asked.Get(ctx, key); err == nil {
				n, _ = strconv.Atoi(string(e.Value()))
			}
			if _, err := asked.Put(ctx, key, []byte(strconv.Itoa(n+1))); err != nil {
				return forecastOut{}, err
			}
			return forecastOut{City: in.City, Summary: fmt.Sprintf("sunny (asked %d times)", n+1), At: time.Now()}, nil
		}))
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
