#!/bin/bash
#PBS -N ${name}
#PBS -l nodes=${nodes}:ppn=${ranks_per_node}
#PBS -l walltime=${walltime}
#PBS -o ${stdout}
#PBS -e ${stderr}
#PBS -q ${queue}
#PBS -A ${account}
${scheduler_options}
# pilot job ${name}: ${ranks} MPI ranks on ${nodes} node(s), walltime ${walltime}
${body}
