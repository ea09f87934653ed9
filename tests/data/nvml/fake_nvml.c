/* A stand-in for the NVIDIA driver's libnvidia-ml, with the few calls errkb makes, so that
   errkb's NVML reader is tested through ctypes as it runs on a real host. Built by the tests
   with the system C compiler (tests/unit/test_gpu_probe.py, tests/helpers.py).

   Two fixed GPUs by default. A test describes another machine through variables read at
   nvmlInit_v2:
     FAKE_NVML_GPUS     "name|major.minor|total bytes|free bytes;..." (at most 8 GPUs)
     FAKE_NVML_DRIVER   the driver version string, e.g. "535.104.05"
     FAKE_NVML_CUDA     the newest CUDA version the driver supports, encoded, e.g. 12020
     FAKE_NVML_PROCS    "device:pid:used bytes:name;..." (at most 16 processes) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} process_t;

#define MAX_GPUS 8
#define MAX_PROCS 16
static int count = 2;
static char names[MAX_GPUS][96] = {"NVIDIA H100 80GB HBM3", "NVIDIA A10G"};
static const char *uuids[MAX_GPUS] = {
    "GPU-aaaa1111-0000-0000-0000-000000000000", "GPU-bbbb2222-0000-0000-0000-000000000000",
    "GPU-cccc3333-0000-0000-0000-000000000000", "GPU-dddd4444-0000-0000-0000-000000000000",
    "GPU-eeee5555-0000-0000-0000-000000000000", "GPU-ffff6666-0000-0000-0000-000000000000",
    "GPU-00007777-0000-0000-0000-000000000000", "GPU-11118888-0000-0000-0000-000000000000"};
static unsigned long long totals[MAX_GPUS] = {85520809984ULL, 23836033024ULL};
static unsigned long long frees[MAX_GPUS] = {80000000000ULL, 1000000000ULL};
static int majors[MAX_GPUS] = {9, 8};
static int minors[MAX_GPUS] = {0, 6};
static char driver[96] = "550.54.15";
static int cuda_version = 12040;
static int nprocs = 0;
static unsigned int proc_device[MAX_PROCS], proc_pid[MAX_PROCS];
static unsigned long long proc_used[MAX_PROCS];
static char proc_name[MAX_PROCS][96];

static void read_gpus(const char *spec) {
    char buffer[2048], *entry, *save = NULL;
    strncpy(buffer, spec, sizeof buffer - 1);
    buffer[sizeof buffer - 1] = 0;
    count = 0;
    for (entry = strtok_r(buffer, ";", &save); entry && count < MAX_GPUS;
         entry = strtok_r(NULL, ";", &save)) {
        char name[96];
        if (sscanf(entry, "%95[^|]|%d.%d|%llu|%llu", name, &majors[count], &minors[count],
                   &totals[count], &frees[count]) == 5) {
            strcpy(names[count], name);
            count++;
        }
    }
}

static void read_procs(const char *spec) {
    char buffer[2048], *entry, *save = NULL;
    strncpy(buffer, spec, sizeof buffer - 1);
    buffer[sizeof buffer - 1] = 0;
    nprocs = 0;
    for (entry = strtok_r(buffer, ";", &save); entry && nprocs < MAX_PROCS;
         entry = strtok_r(NULL, ";", &save)) {
        if (sscanf(entry, "%u:%u:%llu:%95[^;]", &proc_device[nprocs], &proc_pid[nprocs],
                   &proc_used[nprocs], proc_name[nprocs]) == 4)
            nprocs++;
    }
}

static void defaults(void) {
    count = 2;
    strcpy(names[0], "NVIDIA H100 80GB HBM3");
    strcpy(names[1], "NVIDIA A10G");
    totals[0] = 85520809984ULL, totals[1] = 23836033024ULL;
    frees[0] = 80000000000ULL, frees[1] = 1000000000ULL;
    majors[0] = 9, majors[1] = 8, minors[0] = 0, minors[1] = 6;
    strcpy(driver, "550.54.15");
    cuda_version = 12040;
    nprocs = 0;
}

int nvmlInit_v2(void) {
    const char *value;
    defaults(); /* each init reads the variables again: a test's machine lasts one init */
    if ((value = getenv("FAKE_NVML_GPUS")) != NULL) read_gpus(value);
    if ((value = getenv("FAKE_NVML_DRIVER")) != NULL) {
        strncpy(driver, value, sizeof driver - 1);
        driver[sizeof driver - 1] = 0;
    }
    if ((value = getenv("FAKE_NVML_CUDA")) != NULL) cuda_version = atoi(value);
    if ((value = getenv("FAKE_NVML_PROCS")) != NULL) read_procs(value);
    return 0;
}
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *out) { *out = (unsigned int)count; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle) {
    if ((int)index >= count) return 2;
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
int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    strncpy(version, driver, length - 1);
    version[length - 1] = 0;
    return 0;
}
int nvmlSystemGetCudaDriverVersion_v2(int *version) { *version = cuda_version; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *handle, unsigned int *size, process_t *infos) {
    unsigned int found = 0, i;
    for (i = 0; i < (unsigned int)nprocs; i++)
        if ((int)proc_device[i] == at(handle)) found++;
    if (found > *size) { *size = found; return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */ }
    *size = 0;
    for (i = 0; i < (unsigned int)nprocs; i++) {
        if ((int)proc_device[i] != at(handle)) continue;
        infos[*size].pid = proc_pid[i];
        infos[*size].usedGpuMemory = proc_used[i];
        infos[*size].gpuInstanceId = infos[*size].computeInstanceId = 0xFFFFFFFFu;
        (*size)++;
    }
    return 0;
}
int nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    int i;
    for (i = 0; i < nprocs; i++) {
        if (proc_pid[i] == pid) {
            strncpy(name, proc_name[i], length - 1);
            name[length - 1] = 0;
            return 0;
        }
    }
    return 6; /* NVML_ERROR_NOT_FOUND */
}
