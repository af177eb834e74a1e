#!/bin/bash
# pilot job ${name}: ${ranks} MPI ranks on this machine
${body}
