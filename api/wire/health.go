package wire

// Health is the answer of GET /healthz: the process answers (always 200),
// and whether its stores can write.
type Health struct {
	// Status is HealthOK, HealthDiskLow or HealthCannotWrite.
	Status string `json:"status"`
	// Disk is the data directory's free space against the reserve; absent
	// when the host watches no disk.
	Disk *DiskStatus `json:"disk,omitempty"`
}

// The words of Health.Status.
const (
	// HealthOK: the host answers and its stores can write.
	HealthOK = "ok"
	// HealthDiskLow: the data directory's free space is below
	// store.min-free, so writes are refused (507) while reads go on.
	HealthDiskLow = "disk low"
	// HealthCannotWrite: the data directory cannot be used (removed,
	// replaced), so writes are refused (503) while reads go on.
	HealthCannotWrite = "store cannot write"
)

// DiskStatus is the data directory's state in Health.
type DiskStatus struct {
	Dir      string `json:"dir"`             // the data directory
	Free     int64  `json:"free"`            // bytes available; -1 when unknown
	Reserve  int64  `json:"reserve"`         // store.min-free, in bytes
	Writable bool   `json:"writable"`        // whether writes are taken
	Error    string `json:"error,omitempty"` // why the data directory cannot be used
}
