package containerd

// MaxTaskGets is maxTaskGets, for the test that ListContainers' two ways
// of reading tasks agree.
const MaxTaskGets = maxTaskGets
