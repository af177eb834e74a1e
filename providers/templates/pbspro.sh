#!/bin/bash
#PBS -N ${name}
#PBS -l select=${nodes}:ncpus=${ranks_per_node}:mpiprocs=${ranks_per_node}${resources}
#PBS -l walltime=${walltime}
#PBS -l place=${place}
#PBS -o ${stdout}
#PBS -e ${stderr}
#PBS -q ${queue}
#PBS -A ${account}
${scheduler_options}
# pilot job ${name}: ${ranks} MPI ranks on ${nodes} node(s), walltime ${walltime}
${body}
