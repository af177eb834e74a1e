#!/bin/bash
#SBATCH --job-name=${name}
#SBATCH --nodes=${nodes}
#SBATCH --ntasks-per-node=${ranks_per_node}
#SBATCH --time=${walltime}
#SBATCH --chdir=${chdir}
#SBATCH --output=${stdout}
#SBATCH --error=${stderr}
#SBATCH --partition=${partition}
#SBATCH --account=${account}
#SBATCH --qos=${qos}
#SBATCH --constraint=${constraint}
#SBATCH --exclusive${exclusive}
${scheduler_options}
# pilot job ${name}: ${ranks} MPI ranks on ${nodes} node(s), walltime ${walltime}
${body}
