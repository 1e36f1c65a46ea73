package main

import (
	"fmt"
	"io"

	"github.com/obol-gateway/obol/idempotency"
)

const dataLostBanner = `
************************************************************************
*  STORE DATA LOST: Redis lost data under this gateway (restarted      *
*  empty, a failover to an empty replica, a FLUSHALL). Every call is    *
*  refused with store_data_lost until an operator acknowledges:        *
*  refserver store acknowledge-data-loss                               *
************************************************************************
`

// watchDataLoss says loudly, on stderr and in the log, when the store sees
// a loss of data (or starts while the fleet's marker records one); the
// admin API acknowledges it.
func (s *server) watchDataLoss(st idempotency.DataLossWatcher, stderr io.Writer) {
	s.metrics.setDataLost(func() bool { return st.DataLoss().Lost })
	st.NotifyDataLoss(func(err error) {
		fmt.Fprint(stderr, dataLostBanner)
		s.log.Error("store data lost: calls are refused with store_data_lost until an operator acknowledges "+
			"(POST /v1/store/acknowledge-data-loss)", "error", s.redact.String(err.Error()))
	})
}
