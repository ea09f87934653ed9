/* A stand-in for the NVIDIA driver's libnvidia-ml, with the few calls errkb makes and two
   fixed GPUs, so that errkb's NVML reader is tested through ctypes as it runs on a real host.
   Built by tests/unit/test_gpu_probe.py with the system C compiler. */
#include <string.h>

typedef struct { unsigned long long total, free, used; } memory_t;
static const char *names[2] = {"NVIDIA H100 80GB HBM3", "NVIDIA A10G"};
static const char *uuids[2] = {"GPU-aaaa1111-0000-0000-0000-000000000000",
                               "GPU-bbbb2222-0000-0000-0000-000000000000"};
static const unsigned long long totals[2] = {85520809984ULL, 23836033024ULL};
static const unsigned long long frees[2] = {80000000000ULL, 1000000000ULL};
static const int majors[2] = {9, 8};
static const int minors[2] = {0, 6};

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *count) { *count = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle) {
    if (index > 1) return 2;
    *handle = (void *)(unsigned long)(index + 1);
    return 0;
}
static int at(void *handle) { return (int)(unsigned long)handle - 1; }
int nvmlDeviceGetMemoryInfo(void *handle, memory_t *memory) {
    memory->total = totals[at(handle)];
    memory->free = frees[at(handle)];
    memory->used = totals[at(handle)] - frees[at(handle)];
    return 0;
}
int nvmlDeviceGetName(void *handle, char *name, unsigned int length) {
    strncpy(name, names[at(handle)], length - 1);
    name[length - 1] = 0;
    return 0;
}
int nvmlDeviceGetUUID(void *handle, char *uuid, unsigned int length) {
    strncpy(uuid, uuids[at(handle)], length - 1);
    uuid[length - 1] = 0;
    return 0;
}
int nvmlDeviceGetCudaComputeCapability(void *handle, int *major, int *minor) {
    *major = majors[at(handle)];
    *minor = minors[at(handle)];
    return 0;
}
